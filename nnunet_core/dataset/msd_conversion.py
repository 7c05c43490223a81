"""A Medical Segmentation Decathlon task as an nnU-Net v2 raw dataset (upstream's
``nnUNetv2_convert_MSD_dataset``), with upstream's file names, ``dataset.json`` and voxels.

``TaskXX_Name`` becomes ``<raw>/DatasetXXX_Name`` (or the id given). A 4-D image (MSD stacks the
modalities along the fourth axis) is split into one 3-D file per channel, ``<case>_000c.nii.gz``,
each with the first three axes' spacing, origin and direction; a 3-D image is copied byte for
byte as ``<case>_0000.nii.gz``; labels are copied as they are. Files whose names start with ``.``
or ``_`` (macOS's ``._`` resource forks) are skipped, as upstream skips them. MSD's
``dataset.json`` keeps its keys and order except: ``labels`` turned to name -> int, ``modality``
renamed ``channel_names``, ``file_ending`` added, ``training`` and ``test`` dropped.

Where we differ, on purpose: every file is written aside and renamed, and ``dataset.json`` comes
last, so a killed conversion leaves no torn file and a dataset without ``dataset.json`` marks an
unfinished one, which a rerun completes (upstream refuses any existing dataset of that id; so do
we for any other). Bad input is one line naming the file (``DatasetError``), not an assertion;
the MSD entries of ``training`` and ``test`` must exist; a name after ``TaskXX_`` may hold more
underscores (upstream's unpacking fails on those).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

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
from nnunet_core.io.atomic import atomic_path, remove_atomic_temporaries, write_text
from nnunet_core.io.json_input import type_name
from nnunet_core.io.readers.sitk_io import itk_reason, read_sitk
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TR, IMAGES_TS, LABELS_TR
from nnunet_core.layout.roots import DATASET_NAME_RE, dataset_folder_name
from nnunet_core.runtime.parallel import map_cases

TASK_FOLDER_RE = re.compile(r"^Task(\d+)_(.+)$")
MSD_FOLDERS = (LABELS_TR, IMAGES_TS, IMAGES_TR)


@dataclass(frozen=True)
class MsdTask:
    """A checked MSD task folder: its id, its name and its ``dataset.json``."""

    folder: Path
    task_id: int
    name: str
    dataset_json: dict[str, Any]


def read_msd_task(folder: str | Path) -> MsdTask:
    """The task in ``folder``, checked before anything is written; ``DatasetError`` naming the
    file or folder that is missing or wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"{folder}: no such folder (expected an MSD task TaskXX_Name)")
    match = TASK_FOLDER_RE.match(folder.name)
    dataset_name = match and dataset_folder_name(int(match.group(1)), match.group(2))
    if not match or not DATASET_NAME_RE.match(dataset_name or ""):
        msg = (
            f"{folder}: not an MSD task folder (its name must be TaskXX_Name, e.g. Task05_Prostate)"
        )
        raise DatasetError(msg)
    content = read_task_json(folder, MSD_FOLDERS, "an MSD task", "MSD dataset.json")
    _check_dataset_json(folder / DATASET_JSON, content)
    return MsdTask(folder, int(match.group(1)), match.group(2), content)


def _check_dataset_json(path: Path, content: dict[str, Any]) -> None:
    """The keys the translation reads, and every file the task lists."""
    kinds = (("modality", dict), ("labels", dict), ("training", list), ("test", list))
    check_json_keys(path, content, kinds, "an MSD dataset.json")
    listed: list[Any] = list(content["test"])
    for entry in content["training"]:
        if not isinstance(entry, dict) or not {"image", "label"} <= entry.keys():
            raise DatasetError(f"{path}: a 'training' entry is not {{image, label}}: {entry!r}")
        listed += [entry["image"], entry["label"]]
    for relative in listed:
        if not isinstance(relative, str):
            raise DatasetError(f"{path}: a listed file is {type_name(relative)}, not a path")
        if not (path.parent / relative).is_file():
            raise DatasetError(f"{path.parent / relative}: missing (listed in {path})")


def translate_dataset_json(msd: dict[str, Any]) -> dict[str, Any]:
    """nnU-Net v2's ``dataset.json`` from MSD's, in upstream's key order: every other key kept
    where it was (``numTraining`` too), ``labels`` inverted, ``file_ending`` and
    ``channel_names`` (MSD's ``modality``) in place if present, else appended in that order."""
    translated = dict(msd)
    translated["labels"] = {name: int(value) for value, name in msd["labels"].items()}
    translated["file_ending"] = NIFTI
    translated["channel_names"] = translated.pop("modality")
    del translated["training"], translated["test"]
    return translated


def msd_files(folder: Path) -> list[Path]:
    """A folder's NIfTI files, hidden (``.``, macOS's ``._``) and ``_`` names left out, sorted."""
    return sorted(
        p
        for p in folder.iterdir()
        if p.name.endswith(NIFTI) and not p.name.startswith((".", "_")) and p.is_file()
    )


def channel_file_name(image_name: str, channel: int) -> str:
    """``la_003.nii.gz``, 1 -> ``la_003_0001.nii.gz``."""
    return f"{image_name[: -len(NIFTI)]}_{channel:04d}{NIFTI}"


def _dimension(path: Path) -> int:
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError as exc:
        raise DatasetError(f"{path}: not a readable NIfTI image ({itk_reason(exc)})") from None
    return reader.GetDimension()


def split_image(source: str, target_folder: str) -> list[str]:
    """Write ``source``'s channels into ``target_folder``; the names written.

    A worker's job (paths as strings, so they pickle cheaply)."""
    path, folder = Path(source), Path(target_folder)
    dimension = _dimension(path)
    if dimension == 3:
        target = folder / channel_file_name(path.name, 0)
        copy_file(path, target)
        return [target.name]
    if dimension != 4:
        msg = f"{path}: a {dimension}-D image (an MSD image is 3-D, or 4-D with channels last)"
        raise DatasetError(msg)
    image = read_sitk(path)
    voxels = sitk.GetArrayFromImage(image)  # (channel, z, y, x)
    spacing, origin = image.GetSpacing()[:3], image.GetOrigin()[:3]
    direction = tuple(np.asarray(image.GetDirection()).reshape(4, 4)[:3, :3].ravel())
    written = []
    for channel in range(voxels.shape[0]):
        part = sitk.GetImageFromArray(voxels[channel])
        part.SetSpacing(spacing)
        part.SetOrigin(origin)
        part.SetDirection(direction)
        target = folder / channel_file_name(path.name, channel)
        with atomic_path(target, suffix=NIFTI, fsync=False) as tmp:
            sitk.WriteImage(part, str(tmp))
        written.append(target.name)
    return written


def convert_msd_task(
    task: MsdTask,
    raw_root: Path,
    other_roots: list[Path | None],
    target_id: int | None = None,
    num_processes: int = 1,
    disable_progress: bool | None = None,
) -> Path:
    """Convert ``task`` into ``raw_root``; the dataset folder written.

    ``other_roots``: the preprocessed and results roots (None where unset), searched for a
    dataset of the same id as upstream does."""
    dataset_id = task.task_id if target_id is None else target_id
    target = raw_root / dataset_folder_name(dataset_id, task.name)
    conflicts = conflicting_datasets([raw_root, *other_roots], dataset_id)
    if conflicts and not unfinished(target, conflicts):
        msg = (
            f"{conflicts[0]}: dataset id {dataset_id} is already taken; "
            "choose another with -overwrite_id"
        )
        raise DatasetError(msg)
    jobs: list[tuple[str, tuple[str, str]]] = []
    for source_sub, target_sub in ((IMAGES_TR, IMAGES_TR), (IMAGES_TS, IMAGES_TS)):
        out = target / target_sub
        out.mkdir(parents=True, exist_ok=True)
        remove_atomic_temporaries(out)
        jobs += [(p.name, (str(p), str(out))) for p in msd_files(task.folder / source_sub)]
    labels_out = target / LABELS_TR
    labels_out.mkdir(parents=True, exist_ok=True)
    remove_atomic_temporaries(labels_out)
    map_cases(split_image, jobs, num_processes, "split MSD images", disable_progress)
    for label in msd_files(task.folder / LABELS_TR):
        copy_file(label, labels_out / label.name)
    text = dataset_json_text(translate_dataset_json(task.dataset_json))
    write_text(target / DATASET_JSON, text)
    return target
