"""The input functions of one run: what a rule needs, often known only from the plans or the
selection (Snakemake checkpoints), and the targets of each stage.

Each method is thin: it reads the checkpoint outputs and passes them, with the run's paths, to
``nnunet_core.workflow.inputs`` (unit-tested there). The rules name them as
``RUN.inputs.<method>`` (``run_context.RunContext``); Snakemake calls them with the job's
wildcards while it builds the DAG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nnunet_core.layout.predictions import (
    configuration_predictions_dir,
    winner_predictions_dir,
)
from nnunet_core.workflow import inputs
from nnunet_core.workflow.run_paths import RunPaths
from nnunet_core.workflow.runs import test_set_of


@dataclass(frozen=True, eq=False)
class RunInputs:
    """Input functions over the run's paths and its Snakemake ``checkpoints`` object."""

    config: dict[str, Any]
    paths: RunPaths
    folds: Sequence[Any]
    num_split_folds: int
    checkpoints: Any
    # each notice about the chosen configurations once per process (planned() runs many times)
    notices: inputs.NoticesOnce
    error: Callable[[str], Any]

    @property
    def synthetic(self) -> bool:
        return bool(self.config["dataset"]["synthetic"].get("enabled", False))

    def raw_training_files(self, _wildcards: Any) -> list[str]:
        """Every raw training file (after the synthetic data exists, when it is synthesized)."""
        if self.synthetic:
            self.checkpoints.synthesize_dataset.get()
        elif self.config["dataset"].get("msd") is not None:
            self.checkpoints.convert_msd.get()
        return inputs.raw_training_files(self.paths.raw, self.paths.raw_dataset_json)

    def planned(self) -> tuple[dict[str, Any], list[str]]:
        """The plans (a checkpoint output) and the configurations chosen from them."""
        plans = inputs.read_plans(self.checkpoints.plan.get().output.plans)
        chosen = inputs.chosen_configurations(
            plans,
            self.config["planning"]["configurations"],
            self.folds,
            self.num_split_folds,
            notify=self.notices,
            error=self.error,
        )
        return plans, chosen

    def configuration_per_identifier(self) -> dict[str, str]:
        return inputs.configuration_per_identifier(*self.planned())

    def preprocessing_targets(self, _wildcards: Any) -> list[str]:
        return inputs.preprocessing_targets(self.paths.pre, self.configuration_per_identifier())

    def configuration_of_identifier(self, wildcards: Any) -> str:
        return self.configuration_per_identifier()[wildcards.data_identifier]

    def preprocessed_data_of_configuration(self, wildcards: Any) -> list[str]:
        return inputs.preprocessed_data_of_configuration(
            self.planned()[0], self.paths.pre, wildcards.configuration
        )

    def previous_stage_summaries(self, wildcards: Any) -> list[str]:
        return inputs.previous_stage_summaries(
            self.planned()[0],
            wildcards.configuration,
            self.paths.fold_summary,
            self.num_split_folds,
        )

    def previous_stage_predictions(self, wildcards: Any) -> list[str]:
        return inputs.previous_stage_predictions(
            self.planned()[0], wildcards.configuration, self.paths.predictions
        )

    def training_targets(self, _wildcards: Any) -> list[str]:
        return inputs.training_targets(self.planned()[1], self.folds, self.paths.fold_summary)

    def fold_summaries(self, wildcards: Any) -> list[str]:
        return inputs.per_fold(self.paths.fold_summary, wildcards.configuration, self.folds)

    def crossval_summary_of_pair(self, wildcards: Any) -> list[str]:
        return inputs.crossval_summaries(
            self.paths.crossval_summary, [wildcards.first, wildcards.second]
        )

    def crossval_and_ensemble_summaries(self, _wildcards: Any) -> list[str]:
        return inputs.crossval_and_ensemble_summaries(
            self.planned()[1], self.paths.crossval_summary, self.paths.ensemble_cv_summary
        )

    def selection(self) -> dict[str, Any]:
        return inputs.read_selection(self.checkpoints.select.get().output.information)

    def winner_configurations(self) -> list[str]:
        return inputs.winner_configurations(self.selection())

    def selected_prediction_folders(self, _wildcards: Any) -> list[Any]:
        return [
            configuration_predictions_dir(self.paths.predictions, c)
            for c in self.winner_configurations()
        ]

    def winner_prediction_folder(self, _wildcards: Any) -> Any:
        """The ensemble's folder, or the single selected configuration's."""
        return winner_predictions_dir(self.paths.predictions, self.winner_configurations())

    def postprocessing_file(self, _wildcards: Any) -> Any:
        return inputs.postprocessing_file(self.selection())

    def has_test_set(self) -> bool:
        """Synthetic data always has labelsTs; real data only if the folder exists."""
        return test_set_of(self.config, self.paths.raw)[0]

    def has_test_labels(self) -> bool:
        return test_set_of(self.config, self.paths.raw)[1]

    def final_targets(self, _wildcards: Any) -> list[Any]:
        return inputs.final_targets(
            self.paths.report_page, self.paths.final_predictions, self.has_test_set()
        )

    def test_summary_if_any(self, _wildcards: Any) -> list[Any]:
        return [self.paths.test_summary] if self.has_test_labels() else []

    def stage_targets(self, stage: str) -> list[Any]:
        """The inputs of a stage rule (``snakemake preprocessed``, ...; ``all`` is the whole
        run): paths, and input functions for what the plans decide. Paths known before the plans
        stay plain, so that a dry run lists their jobs from the start."""
        preprocessed = [self.paths.verify, self.paths.splits, self.preprocessing_targets]
        targets = {
            # the plans decide the configurations: after them a dry run lists every training job
            "planned": [self.paths.plans, self.paths.splits],
            "preprocessed": preprocessed,
            "trained": [self.training_targets],
            "selected": [self.paths.inference_information],
            "all": [*preprocessed, self.training_targets, self.final_targets],
        }
        return targets[stage]
