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
# Folders of this tree that are no configuration's: no configuration may be named like them.
RESERVED_FOLDERS = (ENSEMBLE_PREDICTIONS_FOLDER, FINAL_PREDICTIONS_FOLDER)


def predictions_dataset_dir(work_dir: Path, dataset_name: str) -> Path:
    """The workflow's ``predictions/<Dataset>`` (test-set predictions; no upstream equivalent)."""
    return work_dir / PREDICTIONS_FOLDER / dataset_name


def configuration_name_pattern() -> str:
    """A configuration's name as a regular expression (the workflow's ``{configuration}``
    wildcard): letters, digits and underscores, never one of ``RESERVED_FOLDERS``, so that the
    rule writing one configuration's predictions never claims ``ensemble/`` or ``final/``."""
    reserved = "|".join(RESERVED_FOLDERS)
    return rf"(?!(?:{reserved})(?![A-Za-z0-9_]))[A-Za-z0-9_]+"


def configuration_predictions_dir(predictions_dir: Path, configuration: str) -> Path:
    return predictions_dir / configuration


def winner_predictions_dir(predictions_dir: Path, configurations: Sequence[str]) -> Path:
    """The ensemble's predictions for several members, else the one configuration's."""
    if len(configurations) > 1:
        return predictions_dir / ENSEMBLE_PREDICTIONS_FOLDER
    return configuration_predictions_dir(predictions_dir, configurations[0])
