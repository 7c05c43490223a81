"""An nnU-Net v1 raw task as an nnU-Net v2 raw dataset (upstream's
``nnUNetv2_convert_old_nnUNet_dataset``), with upstream's files and ``dataset.json``.

v1 already named its images ``<case>_000c.nii.gz``, so the folders ``imagesTr``, ``labelsTr`` and,
where present, ``imagesTs``, ``labelsTs``, ``imagesVal``, ``labelsVal`` are copied as they are,
every file (hidden ones too) byte for byte, as upstream's ``copytree`` copies them. v1's
``dataset.json`` keeps its keys and order except: ``tensorImageSize``, ``numTest``, ``training``,
``test`` dropped, ``labels`` turned to name -> int in place, ``modality`` renamed
``channel_names`` and moved to the end, then ``file_ending`` appended (upstream's order, which
differs from its MSD converter's).

Where we differ, on purpose: every file is written aside and renamed, ``dataset.json`` last, so
a killed conversion leaves no torn file and a dataset without ``dataset.json`` is an unfinished
one, which a rerun completes (upstream refuses any existing folder of that name). The output name
must be ``DatasetXXX_Name`` and no other raw dataset may hold its id (upstream checks neither,
and an id two datasets share cannot be resolved). The four dropped keys may be missing (upstream
fails on each); bad input is one line naming the file (``DatasetError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.dataset.task_conversion import (
    NIFTI,
    check_json_keys,
    conflicting_datasets,
    copy_file,
    dataset_json_text,
    read_task_json,
    unfinished,
)
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import remove_atomic_temporaries, write_text
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TR, IMAGES_TS, LABELS_TR, LABELS_TS
from nnunet_core.layout.roots import DATASET_NAME_RE

# v1's validation folders, which upstream copies too (they are no part of our raw tree)
IMAGES_VAL = "imagesVal"
LABELS_VAL = "labelsVal"
REQUIRED_FOLDERS = (IMAGES_TR, LABELS_TR)
OPTIONAL_FOLDERS = (IMAGES_TS, LABELS_TS, IMAGES_VAL, LABELS_VAL)
DROPPED_KEYS = ("tensorImageSize", "numTest", "training", "test", "modality")


@dataclass(frozen=True)
class OldTask:
    """A checked nnU-Net v1 raw task folder and its ``dataset.json``."""

    folder: Path
    dataset_json: dict[str, Any]


def read_old_task(folder: str | Path) -> OldTask:
    """The task in ``folder``, checked before anything is written; ``DatasetError`` naming the
    file or folder that is missing or wrong."""
    folder = Path(folder)
    content = read_task_json(folder, REQUIRED_FOLDERS, "an nnU-Net v1 task", "v1 dataset.json")
    kinds = (("modality", dict), ("labels", dict))
    check_json_keys(folder / DATASET_JSON, content, kinds, "an nnU-Net v1 dataset.json")
    return OldTask(folder, content)


def translate_old_dataset_json(old: dict[str, Any]) -> dict[str, Any]:
    """nnU-Net v2's ``dataset.json`` from v1's, in upstream's key order (see the module)."""
    translated = {key: value for key, value in old.items() if key not in DROPPED_KEYS}
    translated["labels"] = {name: int(value) for value, name in old["labels"].items()}
    translated["channel_names"] = dict(old["modality"])
    translated["file_ending"] = NIFTI
    return translated


def copy_tree(source: Path, target: Path) -> None:
    """Every file below ``source`` into ``target``, each written aside and renamed; a killed
    copy's temporaries removed first (this job owns ``target``)."""
    for folder in (source, *sorted(p for p in source.rglob("*") if p.is_dir())):
        out = target / folder.relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        remove_atomic_temporaries(out)
        for path in sorted(folder.iterdir()):
            if path.is_file():
                copy_file(path, out / path.name)


def convert_old_task(task: OldTask, raw_root: Path, dataset_name: str) -> Path:
    """Convert ``task`` into ``raw_root / dataset_name``; the dataset folder written."""
    match = DATASET_NAME_RE.match(dataset_name)
    if not match:
        msg = f"{dataset_name!r}: not a dataset name (DatasetXXX_Name, e.g. Dataset004_Hippocampus)"
        raise DatasetError(msg)
    target = raw_root / dataset_name
    conflicts = conflicting_datasets([raw_root], int(match.group(1)))
    if conflicts and not unfinished(target, conflicts):
        msg = f"{conflicts[0]}: dataset id {match.group(1)} is already taken; choose another name"
        raise DatasetError(msg)
    for sub in (*REQUIRED_FOLDERS, *OPTIONAL_FOLDERS):
        if (task.folder / sub).is_dir():
            copy_tree(task.folder / sub, target / sub)
    text = dataset_json_text(translate_old_dataset_json(task.dataset_json))
    write_text(target / DATASET_JSON, text)
    return target
