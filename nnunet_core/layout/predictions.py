"""The workflow's predictions tree (no upstream equivalent): test-set predictions per dataset.

work_dir/predictions/<Dataset>/<configuration>/   one configuration's predictions
    ensemble/                                      the selected ensemble's
    final/                                         after postprocessing
    test_summary.json                              metrics against labelsTs
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

PREDICTIONS_FOLDER = "predictions"
ENSEMBLE_PREDICTIONS_FOLDER = "ensemble"
FINAL_PREDICTIONS_FOLDER = "final"
TEST_SUMMARY_JSON = "test_summary.json"


def predictions_dataset_dir(work_dir: Path, dataset_name: str) -> Path:
    """The workflow's ``predictions/<Dataset>`` (test-set predictions; no upstream equivalent)."""
    return work_dir / PREDICTIONS_FOLDER / dataset_name


def configuration_predictions_dir(predictions_dir: Path, configuration: str) -> Path:
    return predictions_dir / configuration


def winner_predictions_dir(predictions_dir: Path, configurations: Sequence[str]) -> Path:
    """The ensemble's predictions for several members, else the one configuration's."""
    if len(configurations) > 1:
        return predictions_dir / ENSEMBLE_PREDICTIONS_FOLDER
    return configuration_predictions_dir(predictions_dir, configurations[0])
