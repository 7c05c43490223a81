"""The trainer examples of ``examples/`` as a user has them: copied to a folder outside the
repository and named by file path (``/path/file.py:Class``), so that a test exercises the
file-path lookup and the model folder's record of the file, not an import from the repository.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from pathlib import Path

from tests.helpers.paths import REPO

EXAMPLES = {
    "FocalDiceTrainer": "focal_dice_loss/focal_dice_trainer.py",
    "SegResNetTrainer": "segresnet/segresnet_trainer.py",
    "ShortScheduleTrainer": "short_schedule/short_schedule_trainer.py",
}


def copy_examples(folder: Path, trainers: Iterable[str] = EXAMPLES) -> Path:
    """``folder`` with the example file of each of ``trainers`` copied into it."""
    for trainer in trainers:
        shutil.copy(REPO / "examples" / EXAMPLES[trainer], folder)
    return folder


def example_file(folder: Path, trainer: str) -> Path:
    """The copy of ``trainer``'s example file in ``folder``."""
    return folder / Path(EXAMPLES[trainer]).name


def by_path(folder: Path, trainer: str) -> str:
    """The ``-tr`` value that names ``trainer`` by the path of its copy in ``folder``."""
    return f"{example_file(folder, trainer)}:{trainer}"


def recorded_from_file(model_folder: Path, trainer: str, source: Path) -> dict:
    """The model folder's trainer.json, asserted to record ``trainer`` as found by its file
    ``source`` with a byte-equal copy of it; returned for the caller's further checks."""
    record = json.loads((model_folder / "trainer.json").read_text())
    assert (record["class"], record["found_by"]) == (trainer, "file"), record
    assert record["original_file"] == str(source)
    assert (model_folder / record["source"]).read_bytes() == source.read_bytes()
    return record
