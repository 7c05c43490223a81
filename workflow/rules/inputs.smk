# Input functions: what a rule needs, often known only from the plans or the selection
# (checkpoints), the report's optional figure and the targets of each stage. Included by
# common.smk.
import json

from snakemake.logging import logger

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import Plans
from nnunet_core.workflow.config import configurations_of_run
from nnunet_core.workflow.runs import test_set_of


def raw_training_files(wildcards):
    """Every raw training file: touching one reruns the check, and through it what follows."""
    if SYNTHETIC:
        checkpoints.synthesize_dataset.get()
    files = [RAW_DATASET_JSON]
    for folder in TRAINING_FOLDERS:
        if (RAW / folder).is_dir():
            files += sorted(p for p in (RAW / folder).iterdir() if p.is_file())
    return files


def planned():
    """The plans (a checkpoint output) and the configurations chosen from them.

    A chosen configuration the plans lack (3d_lowres is planned only for large images) stops
    the workflow with one line. Snakemake wraps any exception of an input function in an
    InputFunctionException with a traceback; SystemExit is the one it lets through: the run
    stops (exit 2 while building the DAG; after the plan job, Snakemake adds its own
    "Terminating processes" and "At least one job did not complete" lines).
    """
    plans = Plans.load(checkpoints.plan.get().output.plans)
    try:
        chosen, notices = configurations_of_run(
            plans, config["planning"]["configurations"], FOLDS, NUM_SPLIT_FOLDS
        )
    except ConfigurationError as exc:
        logger.error(f"ConfigurationError: {exc}")
        raise SystemExit(2) from None
    for notice in notices:
        if notice not in _NOTICES_SHOWN:
            _NOTICES_SHOWN.add(notice)
            logger.warning(notice)
    return plans, chosen


_NOTICES_SHOWN = set()


def configuration_per_identifier():
    """Data identifier -> the configuration that preprocesses it, for the first chosen one using
    it (shared data preprocess once; a cascade stage's data is its parent's, e.g. 3d_fullres).
    """
    plans, chosen = planned()
    return {
        identifier: plans.preprocessing_configuration(members[0])
        for identifier, members in plans.data_identifier_groups(chosen).items()
    }


def preprocessing_targets(wildcards):
    return [
        preprocess_summary_file(PRE, identifier)
        for identifier in configuration_per_identifier()
    ]


def configuration_of_identifier(wildcards):
    return configuration_per_identifier()[wildcards.data_identifier]


def preprocessed_data_of_configuration(wildcards):
    """The preprocessing summary of the data a configuration trains on."""
    plans, _ = planned()
    identifier = plans.data_identifier_of(wildcards.configuration)
    return preprocess_summary_file(PRE, identifier)


def previous_stage_summaries(wildcards):
    """A cascade fold's previous stage (3d_lowres): the validation summaries of all its folds,
    each written after the fold's predicted_next_stage files, which the cascade reads for every
    training case (none for other configurations). Not checkpoint_final.pth: the export comes
    after it."""
    plans, _ = planned()
    previous = plans.previous_stage_of(wildcards.configuration)
    if previous is None:
        return []
    return [model_path(FOLD_SUMMARY, previous, f) for f in range(NUM_SPLIT_FOLDS)]


def previous_stage_predictions(wildcards):
    """A cascade's test-set prediction reads its previous stage's predictions (none for others);
    the previous stage is predicted even where the selection did not pick it."""
    plans, _ = planned()
    previous = plans.previous_stage_of(wildcards.configuration)
    if previous is None:
        return []
    return [configuration_predictions_dir(PREDICTIONS, previous)]


def training_targets(wildcards):
    """checkpoint_final.pth and the validation summary of every chosen configuration and fold."""
    _, chosen = planned()
    return [
        path
        for configuration in chosen
        for fold in FOLDS
        for path in (
            model_path(FINAL_CHECKPOINT, configuration, fold),
            model_path(FOLD_SUMMARY, configuration, fold),
        )
    ]


def fold_summaries(wildcards):
    """Every fold's validation summary of one configuration."""
    return [model_path(FOLD_SUMMARY, wildcards.configuration, fold) for fold in FOLDS]


def fold_checkpoints(wildcards):
    return [
        model_path(FINAL_CHECKPOINT, wildcards.configuration, fold) for fold in FOLDS
    ]


def crossval_summary_of_pair(wildcards):
    return [crossval_summary(wildcards.first), crossval_summary(wildcards.second)]


def crossval_and_ensemble_summaries(wildcards):
    """Every single configuration's and every pair ensemble's cross-validation summary."""
    _, chosen = planned()
    singles = [crossval_summary(c) for c in chosen]
    pairs = [
        ensemble_cv_summary(a, b) for i, a in enumerate(chosen) for b in chosen[i + 1 :]
    ]
    return singles + pairs


def selection():
    with open(checkpoints.select.get().output.information) as handle:
        return json.load(handle)


def winner_configurations():
    """Configurations of the selected model or ensemble."""
    chosen = selection()["best_model_or_ensemble"]["selected_model_or_models"]
    return [model["configuration"] for model in chosen]


def selected_prediction_folders(wildcards):
    return [
        configuration_predictions_dir(PREDICTIONS, c) for c in winner_configurations()
    ]


def winner_prediction_folder(wildcards):
    """The ensemble's folder, or the single selected configuration's."""
    return winner_predictions_dir(PREDICTIONS, winner_configurations())


def postprocessing_file(wildcards):
    return selection()["best_model_or_ensemble"]["postprocessing_file"]


def has_test_set():
    """Synthetic data always has labelsTs; real data only if the folder exists."""
    return test_set_of(config, RAW)[0]


def has_test_labels():
    return test_set_of(config, RAW)[1]


def final_targets(wildcards):
    targets = [REPORT_PAGE]
    if has_test_set():
        targets.append(FINAL_PREDICTIONS)
    return targets


def test_summary_if_any(wildcards):
    return [TEST_SUMMARY] if has_test_labels() else []


def test_dice_figure():
    """The report's test-set figure: only when the test set has labels (outputs may be empty)."""
    if not has_test_labels():
        return []
    return report(
        REPORT / "test_dice.png", caption="../report/test_dice.rst", category="Test set"
    )


# What each stage target (`snakemake preprocessed`, ...) asks for; `all` is the whole run. Paths
# known before the plans stay plain, so that a dry run lists their jobs from the start.
PREPROCESSED_TARGETS = [
    VERIFY,
    SPLITS,
    preprocessing_targets,
]
STAGE_TARGETS = {
    "preprocessed": PREPROCESSED_TARGETS,
    "trained": [training_targets],
    "selected": [INFERENCE_INFORMATION],
    "all": [*PREPROCESSED_TARGETS, training_targets, final_targets],
}


def stage_targets(stage):
    """The inputs of a stage rule: paths, and input functions for what the plans decide."""
    return STAGE_TARGETS[stage]
