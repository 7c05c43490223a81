"""What the workflow's rules need, when it is known only from the plans or the selection.

The rules' input functions (``run_inputs.RunInputs``) are one-line wrappers: they read the
checkpoint outputs (plans, selection) and pass them here with the run's paths. Everything here
takes its inputs as arguments (no Snakemake globals), so each input list is unit-tested
(tests/unit/workflow/test_workflow_inputs.py). Path patterns carry Snakemake's wildcards
(``{configuration}``, ``{fold}``, ``{first}``, ``{second}``) and are filled in with ``fill``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.io.plans import Plans
from nnunet_core.layout.predictions import configuration_predictions_dir
from nnunet_core.layout.preprocessed import preprocess_summary_file
from nnunet_core.layout.raw import TRAINING_FOLDERS
from nnunet_core.workflow.config import configurations_of_run


def fill(pattern: str | Path, **wildcards: Any) -> str:
    """A path pattern of ``run_paths.RunPaths`` with its wildcards filled in (``fold`` may be
    left out)."""
    return str(pattern).format(**wildcards)


def model_path(pattern: str | Path, configuration: str, fold: Any = None) -> str:
    """A path under a fold's folder (``RunPaths.fold_dir``) for one configuration and fold."""
    return fill(pattern, configuration=configuration, fold=fold)


def read_json(path: str | Path) -> Any:
    """A checkpoint's JSON output."""
    return json.loads(Path(path).read_text())


def read_selection(path: str | Path) -> dict[str, Any]:
    """The select checkpoint's inference_information.json, checked: a malformed file is one
    line naming it and the key (never a KeyError inside an input function)."""
    return read_inference_information(path, ConfigurationError, needs_winner=True)


def read_plans(path: str | Path) -> Plans:
    """The plans (the plan checkpoint's output), as the typed view the functions here take."""
    return Plans.load(Path(path))


def raw_training_files(raw_dir: Path, dataset_json: Path) -> list[Path]:
    """Every raw training file: touching one reruns the dataset check, and through it what
    follows. dataset.json first, then each training folder's files in name order."""
    files = [dataset_json]
    for folder in TRAINING_FOLDERS:
        if (raw_dir / folder).is_dir():
            files += sorted(p for p in (raw_dir / folder).iterdir() if p.is_file())
    return files


class NoticesOnce:
    """Notices about the chosen configurations, each shown once per workflow process (the input
    functions that read the plans run many times while the DAG is built)."""

    def __init__(self, show: Callable[[str], Any]) -> None:
        self.show = show
        self.shown: set[str] = set()

    def __call__(self, notices: Iterable[str]) -> None:
        for notice in notices:
            if notice not in self.shown:
                self.shown.add(notice)
                self.show(notice)


def chosen_configurations(
    plans: Plans,
    requested: Sequence[str] | None,
    folds: Sequence[Any],
    num_split_folds: int,
    *,
    notify: Callable[[Iterable[str]], Any],
    error: Callable[[str], Any],
) -> list[str]:
    """The configurations this run trains (config ``planning.configurations``, or the planned
    defaults); their notices go to ``notify``.

    A chosen configuration the plans lack (3d_lowres is planned only for large images) stops the
    workflow with one line, given to ``error``. Snakemake wraps any exception of an input
    function in an InputFunctionException with a traceback; SystemExit is the one it lets
    through: the run stops (exit 2 while building the DAG; after the plan job Snakemake adds its
    own "Terminating processes" and "At least one job did not complete" lines).
    """
    try:
        chosen, notices = configurations_of_run(plans, requested, folds, num_split_folds)
    except ConfigurationError as exc:
        error(f"ConfigurationError: {exc}")
        raise SystemExit(2) from None
    notify(notices)
    return chosen


def configuration_per_identifier(plans: Plans, chosen: Sequence[str]) -> dict[str, str]:
    """Data identifier -> the configuration that preprocesses it, for the first chosen one using
    it (shared data preprocess once; a cascade stage's data is its parent's, e.g. 3d_fullres)."""
    return {
        identifier: plans.preprocessing_configuration(members[0])
        for identifier, members in plans.data_identifier_groups(chosen).items()
    }


def preprocessing_targets(preprocessed_dir: Path, identifiers: Iterable[str]) -> list[Path]:
    """The preprocessing summary of every data identifier (one preprocess job each)."""
    return [preprocess_summary_file(preprocessed_dir, i) for i in identifiers]


def preprocessed_data_of_configuration(
    plans: Plans, preprocessed_dir: Path, configuration: str
) -> Path:
    """The preprocessing summary of the data a configuration trains on."""
    identifier = plans.data_identifier_of(configuration)
    return preprocess_summary_file(preprocessed_dir, identifier)


def previous_stage_summaries(
    plans: Plans, configuration: str, fold_summary: str | Path, num_split_folds: int
) -> list[str]:
    """A cascade fold's previous stage (3d_lowres): the validation summaries of all its folds,
    each written after the fold's predicted_next_stage files, which the cascade reads for every
    training case (none for other configurations). Not checkpoint_final.pth: the export comes
    after it."""
    previous = plans.previous_stage_of(configuration)
    if previous is None:
        return []
    return [model_path(fold_summary, previous, f) for f in range(num_split_folds)]


def previous_stage_predictions(
    plans: Plans, configuration: str, predictions_dir: Path
) -> list[Path]:
    """A cascade's test-set prediction reads its previous stage's predictions (none for others);
    the previous stage is predicted even where the selection did not pick it."""
    previous = plans.previous_stage_of(configuration)
    if previous is None:
        return []
    return [configuration_predictions_dir(predictions_dir, previous)]


def training_targets(
    chosen: Sequence[str], folds: Sequence[Any], fold_summary: str | Path
) -> list[str]:
    """The validation summary of every chosen configuration and fold: a fold's last file,
    written after its checkpoint_final.pth (the train rule's only declared output)."""
    return [
        model_path(fold_summary, configuration, fold) for configuration in chosen for fold in folds
    ]


def per_fold(pattern: str | Path, configuration: str, folds: Sequence[Any]) -> list[str]:
    """One path per fold of a configuration (its validation summaries, its final checkpoints)."""
    return [model_path(pattern, configuration, fold) for fold in folds]


def crossval_summaries(crossval_summary: str | Path, configurations: Sequence[str]) -> list[str]:
    """The cross-validation summary of each configuration (an ensemble pair's inputs)."""
    return [model_path(crossval_summary, c) for c in configurations]


def crossval_and_ensemble_summaries(
    chosen: Sequence[str], crossval_summary: str | Path, ensemble_cv_summary: str | Path
) -> list[str]:
    """Every single configuration's and every pair ensemble's cross-validation summary (pairs in
    the chosen order: the selection compares them all)."""
    singles = crossval_summaries(crossval_summary, chosen)
    pairs = [
        fill(ensemble_cv_summary, first=a, second=b)
        for i, a in enumerate(chosen)
        for b in chosen[i + 1 :]
    ]
    return singles + pairs


def winner_configurations(selection: dict[str, Any]) -> list[str]:
    """Configurations of the selected model or ensemble (inference_information.json)."""
    chosen = selection["best_model_or_ensemble"]["selected_model_or_models"]
    return [model["configuration"] for model in chosen]


def postprocessing_file(selection: dict[str, Any]) -> str:
    """The selected postprocessing (a pickle or JSON file the selection wrote)."""
    return selection["best_model_or_ensemble"]["postprocessing_file"]


def final_targets(report_page: Path, final_predictions: Path, has_test_set: bool) -> list[Path]:
    """The run's last files: the report, and the postprocessed test predictions if any."""
    targets = [report_page]
    if has_test_set:
        targets.append(final_predictions)
    return targets
