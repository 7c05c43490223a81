"""Tiny NIfTI files for the dataset-conversion tests (convert-msd, convert-old-dataset): written
with a rotated direction, so that a direction dropped or transposed by a converter shows, and read
back as file lists and geometry to compare with upstream's output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

# a rotation about z, so that a direction that is dropped or transposed shows
ROTATION = (0.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0)
SPACING = (0.7, 0.8, 2.5)
ORIGIN = (10.0, -20.0, 5.5)
SHAPE = (3, 4, 5)  # (z, y, x)


def write_image(image: sitk.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))


def image_3d(array: np.ndarray) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(SPACING)
    image.SetOrigin(ORIGIN)
    image.SetDirection(ROTATION)
    return image


def files_below(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def geometry(path: Path) -> tuple[Any, ...]:
    image = sitk.ReadImage(str(path))
    return (
        image.GetSpacing(),
        image.GetOrigin(),
        image.GetDirection(),
        image.GetPixelIDTypeAsString(),
    )


def _image_4d(array: np.ndarray) -> sitk.Image:
    """(channel, z, y, x) as a 4-D NIfTI, channels on ITK's fourth axis as in the MSD files."""
    image = sitk.GetImageFromArray(array, isVector=False)
    assert image.GetDimension() == 4
    image.SetSpacing((*SPACING, 1.0))
    image.SetOrigin((*ORIGIN, 0.0))
    direction = np.eye(4)
    direction[:3, :3] = np.reshape(ROTATION, (3, 3))
    image.SetDirection(tuple(direction.ravel()))
    return image


def make_task(root: Path, name: str, channels: int, n_train: int = 2) -> Path:
    """An MSD task: images, labels, a test image, hidden ``._`` files and MSD's dataset.json."""
    task = root / name
    rng = np.random.default_rng(channels)
    prefix = name.split("_", 1)[1].lower()
    training = []
    cases = [f"{prefix}_{i:03d}" for i in range(n_train + 1)]
    for i, case in enumerate(cases):
        folder = "imagesTr" if i < n_train else "imagesTs"
        if channels == 1:
            image = image_3d(rng.integers(-100, 400, SHAPE).astype(np.int16))
        else:
            image = _image_4d(rng.normal(size=(channels, *SHAPE)).astype(np.float32))
        write_image(image, task / folder / f"{case}.nii.gz")
        if i < n_train:
            write_image(
                image_3d(rng.integers(0, 3, SHAPE).astype(np.uint8)),
                task / "labelsTr" / f"{case}.nii.gz",
            )
            training.append(
                {"image": f"./imagesTr/{case}.nii.gz", "label": f"./labelsTr/{case}.nii.gz"}
            )
    for folder in ("imagesTr", "imagesTs", "labelsTr"):  # macOS resource forks: skipped
        (task / folder / f"._{cases[0]}.nii.gz").write_bytes(b"\x00\x05\x16\x07 not nifti")
    modality = {"0": "CT"} if channels == 1 else {"0": "FLAIR", "1": "T1w"}
    dataset = {
        "name": name.split("_", 1)[1],
        "description": "tiny test task",
        "reference": "test",
        "licence": "CC-BY-SA 4.0",
        "release": "1.0 04/05/2018",
        "tensorImageSize": "3D" if channels == 1 else "4D",
        "modality": modality,
        "labels": {"0": "background", "1": "edema", "2": "tumour"},
        "numTraining": n_train,
        "numTest": 1,
        "training": training,
        "test": [f"./imagesTs/{cases[-1]}.nii.gz"],
    }
    (task / "dataset.json").write_text(json.dumps(dataset, indent=4))
    return task
