"""What both raw-task converters share (``msd_conversion``, ``old_conversion``): reading and
checking a task's ``dataset.json``, upstream's ``dataset.json`` bytes, byte copies written aside
and renamed, and the dataset ids a conversion must not take (an unfinished conversion of the same
target excepted: no ``dataset.json`` yet)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.io.json_input import read_json_object, type_name
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.roots import dataset_folder_name

NIFTI = ".nii.gz"


def read_task_json(
    folder: Path, subfolders: tuple[str, ...], task: str, json_kind: str
) -> dict[str, Any]:
    """A task folder's ``dataset.json`` once its ``subfolders`` are there; ``task`` and
    ``json_kind`` name what was expected in the message (an MSD task, an nnU-Net v1 one)."""
    if not folder.is_dir():
        raise DatasetError(f"{folder}: no such folder (expected {task})")
    for sub in subfolders:
        if not (folder / sub).is_dir():
            raise DatasetError(f"{folder / sub}: missing ({task} has {', '.join(subfolders)})")
    json_path = folder / DATASET_JSON
    if not json_path.is_file():
        raise DatasetError(f"{json_path}: missing ({task} has its dataset.json)")
    return read_json_object(json_path, json_kind)


def check_json_keys(
    path: Path, content: dict[str, Any], kinds: tuple[tuple[str, type], ...], what: str
) -> None:
    """Each key of ``kinds`` present with its type, and the old-style ``labels`` (value -> name)
    keyed by integers; ``what`` names the file's kind in the message (MSD's, nnU-Net v1's)."""
    for key, kind in kinds:
        if key not in content:
            raise DatasetError(f"{path}: no {key!r} key ({what} has it)")
        if not isinstance(content[key], kind):
            msg = f"{path}: {key!r} must be {type_name(kind())}, not {type_name(content[key])}"
            raise DatasetError(msg)
    for value in content.get("labels", {}):
        if not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            raise DatasetError(f"{path}: label value {value!r} is not an integer")


def dataset_json_text(content: dict[str, Any]) -> str:
    """Upstream's bytes: 4-space indent, keys unsorted, ASCII escapes, no final newline."""
    return json.dumps(content, indent=4, sort_keys=False)


def copy_file(source: Path, target: Path) -> None:
    """A byte copy, written aside and renamed."""
    with atomic_path(target, suffix=NIFTI, fsync=False) as tmp:
        shutil.copyfile(source, tmp)


def conflicting_datasets(roots: list[Path | None], dataset_id: int) -> list[Path]:
    """The dataset folders of ``dataset_id`` in the roots that exist (upstream looks in all
    three: a converted dataset must not share its id with results or preprocessed data)."""
    prefix = dataset_folder_name(dataset_id, "")
    found = []
    for root in roots:
        if root is not None and root.is_dir():
            found += [p for p in sorted(root.iterdir()) if p.name.startswith(prefix) and p.is_dir()]
    return found


def unfinished(target: Path, conflicts: list[Path]) -> bool:
    """The only conflict is our own target without ``dataset.json``: a killed conversion."""
    return conflicts == [target] and not (target / DATASET_JSON).exists()
