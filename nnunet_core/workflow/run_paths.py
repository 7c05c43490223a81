"""Every folder and file of one run that a rule declares, built once from the checked config.

The raw, preprocessed, results and predictions trees and the logs of one (dataset, seed) run:
with several seeds (paper mode) the seed's results, predictions and logs are under seed_<n>
(``runs.RunTree``). Every name comes from ``nnunet_core.layout`` (one module per tree), the
modules the commands write with, so a declared output and the file a command writes cannot
differ. Patterns keep ``{configuration}``, ``{fold}``, ``{first}`` and ``{second}`` as Snakemake
wildcards. The rules read them as ``RUN.paths.<name>`` (``run_context.RunContext``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.layout.predictions import (
    ENSEMBLE_PREDICTIONS_FOLDER,
    FINAL_PREDICTIONS_FOLDER,
    configuration_predictions_dir,
)
from nnunet_core.layout.preprocessed import (
    FINGERPRINT_JSON,
    SPLITS_JSON,
    VERIFY_JSON,
    plans_file,
)
from nnunet_core.layout.raw import DATASET_JSON, images_ts_dir, labels_ts_dir
from nnunet_core.layout.results import (
    REPORT_PAGE_MD,
    SUMMARY_JSON,
    TrainedModel,
    crossval_dir,
    ensemble_name,
    ensembles_dir,
    fold_dir,
    inference_information_file,
    inference_instructions_file,
    report_dir,
    trained_model_dir,
    validation_dir,
)
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir
from nnunet_core.workflow.runs import RunTree


@dataclass(frozen=True)
class RunPaths:
    """The paths of one run (``of_config``); each rule input, output and log is one of these."""

    work: Path
    # the dataset's folder name (Dataset004_Hippocampus)
    dataset: str
    roots: Roots
    raw: Path
    pre: Path
    results: Path
    logs: Path
    # logs of the jobs up to preprocessing, shared by the dataset's seeds
    dataset_logs: Path
    raw_dataset_json: Path
    test_images: Path
    test_labels: Path
    verify: Path
    fingerprint: Path
    splits: Path
    pre_dataset_json: Path
    plans: Path
    # a fold's folder (``{configuration}``, ``{fold}``): its no_retry marker is in it
    fold_dir: Path
    fold_summary: Path
    crossval_summary: Path
    ensemble_cv_summary: Path
    inference_information: Path
    inference_instructions: Path
    report: Path
    report_page: Path
    predictions: Path
    configuration_predictions: Path
    ensemble_predictions: Path
    final_predictions: Path
    test_summary: Path

    @classmethod
    def of_config(
        cls, config: dict[str, Any], plans_name: str, trainer: str, folds: Sequence[Any]
    ) -> RunPaths:
        tree = RunTree.of_config(config)
        roots = tree.roots
        raw = raw_dataset_dir(roots, tree.dataset)
        pre = preprocessed_dataset_dir(roots, tree.dataset)
        results = tree.results_dir
        model_dir = trained_model_dir(results, "{configuration}", plans_name, trainer)
        fold = fold_dir(model_dir, "{fold}")
        pair = [TrainedModel(member, plans_name, trainer) for member in ("{first}", "{second}")]
        report = report_dir(results)
        predictions = tree.predictions_dir
        return cls(
            work=Path(config["work_dir"]),
            dataset=tree.dataset,
            roots=roots,
            raw=raw,
            pre=pre,
            results=results,
            logs=tree.logs,
            dataset_logs=tree.dataset_logs,
            raw_dataset_json=raw / DATASET_JSON,
            test_images=images_ts_dir(raw),
            test_labels=labels_ts_dir(raw),
            verify=pre / VERIFY_JSON,
            fingerprint=pre / FINGERPRINT_JSON,
            splits=pre / SPLITS_JSON,
            pre_dataset_json=pre / DATASET_JSON,
            plans=plans_file(pre, plans_name),
            fold_dir=fold,
            fold_summary=validation_dir(fold) / SUMMARY_JSON,
            crossval_summary=crossval_dir(model_dir, folds) / SUMMARY_JSON,
            ensemble_cv_summary=ensembles_dir(results) / ensemble_name(pair, folds) / SUMMARY_JSON,
            inference_information=inference_information_file(results),
            inference_instructions=inference_instructions_file(results),
            report=report,
            report_page=report / REPORT_PAGE_MD,
            predictions=predictions,
            configuration_predictions=configuration_predictions_dir(predictions, "{configuration}"),
            ensemble_predictions=predictions / ENSEMBLE_PREDICTIONS_FOLDER,
            final_predictions=predictions / FINAL_PREDICTIONS_FOLDER,
            test_summary=tree.test_summary,
        )
