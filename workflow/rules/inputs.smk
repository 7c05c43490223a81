# Input functions: what a rule needs, often known only from the plans or the selection
# (checkpoints), the report's optional figure and the targets of each stage. Each is a thin
# wrapper: it reads the checkpoint outputs and passes them, with the run's paths, to
# nnunet_core.workflow.inputs (unit-tested there). Included by common.smk.
from snakemake.logging import logger

from nnunet_core.workflow import inputs
from nnunet_core.workflow.runs import incomplete_test_set_notice, test_set_of

# Each notice about the chosen configurations once per process (planned() runs many times).
_NOTICES = inputs.NoticesOnce(logger.warning)


def raw_training_files(wildcards):
    """Every raw training file (after the synthetic data exists, when it is synthesized)."""
    if SYNTHETIC:
        checkpoints.synthesize_dataset.get()
    return inputs.raw_training_files(RAW, RAW_DATASET_JSON)


def planned():
    """The plans (a checkpoint output) and the configurations chosen from them."""
    plans = inputs.read_plans(checkpoints.plan.get().output.plans)
    chosen = inputs.chosen_configurations(
        plans,
        config["planning"]["configurations"],
        FOLDS,
        NUM_SPLIT_FOLDS,
        notify=_NOTICES,
        error=logger.error,
    )
    return plans, chosen


def configuration_per_identifier():
    return inputs.configuration_per_identifier(*planned())


def preprocessing_targets(wildcards):
    return inputs.preprocessing_targets(PRE, configuration_per_identifier())


def configuration_of_identifier(wildcards):
    return configuration_per_identifier()[wildcards.data_identifier]


def preprocessed_data_of_configuration(wildcards):
    return inputs.preprocessed_data_of_configuration(
        planned()[0], PRE, wildcards.configuration
    )


def previous_stage_summaries(wildcards):
    return inputs.previous_stage_summaries(
        planned()[0], wildcards.configuration, FOLD_SUMMARY, NUM_SPLIT_FOLDS
    )


def previous_stage_predictions(wildcards):
    return inputs.previous_stage_predictions(
        planned()[0], wildcards.configuration, PREDICTIONS
    )


def training_targets(wildcards):
    return inputs.training_targets(planned()[1], FOLDS, FOLD_SUMMARY)


def fold_summaries(wildcards):
    return inputs.per_fold(FOLD_SUMMARY, wildcards.configuration, FOLDS)


def crossval_summary_of_pair(wildcards):
    return inputs.crossval_summaries(
        CROSSVAL_SUMMARY, [wildcards.first, wildcards.second]
    )


def crossval_and_ensemble_summaries(wildcards):
    return inputs.crossval_and_ensemble_summaries(
        planned()[1], CROSSVAL_SUMMARY, ENSEMBLE_CV_SUMMARY
    )


def selection():
    return inputs.read_selection(checkpoints.select.get().output.information)


def winner_configurations():
    return inputs.winner_configurations(selection())


def selected_prediction_folders(wildcards):
    return [
        configuration_predictions_dir(PREDICTIONS, c) for c in winner_configurations()
    ]


def winner_prediction_folder(wildcards):
    """The ensemble's folder, or the single selected configuration's."""
    return winner_predictions_dir(PREDICTIONS, winner_configurations())


def postprocessing_file(wildcards):
    return inputs.postprocessing_file(selection())


def has_test_set():
    """Synthetic data always has labelsTs; real data only if the folder exists."""
    return test_set_of(config, RAW)[0]


def has_test_labels():
    return test_set_of(config, RAW)[1]


# An incomplete test set is said once at the start of a run (and in the report, rule report).
TEST_SET_NOTICE = incomplete_test_set_notice(config, RAW)
if workflow.is_main_process:
    workflow_devices.print_once(TEST_SET_NOTICE)


def final_targets(wildcards):
    return inputs.final_targets(REPORT_PAGE, FINAL_PREDICTIONS, has_test_set())


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
    # the plans decide the configurations: after them a dry run lists every training job
    "planned": [PLANS, SPLITS],
    "preprocessed": PREPROCESSED_TARGETS,
    "trained": [training_targets],
    "selected": [INFERENCE_INFORMATION],
    "all": [*PREPROCESSED_TARGETS, training_targets, final_targets],
}


def stage_targets(stage):
    """The inputs of a stage rule: paths, and input functions for what the plans decide."""
    return STAGE_TARGETS[stage]
