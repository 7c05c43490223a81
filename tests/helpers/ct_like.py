"""A CT-like raw dataset of realistic size (512 x 512 x 20 int16 Hounsfield units per case),
generated in a second: air outside an elliptic body, fat, soft tissue, bone, an organ (label 1)
and a lesion in it (label 2), with noise. Imports only numpy and SimpleITK, so that upstream's
peer venv can run it too (``tests/data/fingerprint_ct/make_expected.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import SimpleITK as sitk

NAME = "Dataset961_CTLike"
SHAPE = (20, 512, 512)  # z, y, x
SPACING = (0.78125, 0.78125, 5.0)  # x, y, z (ITK order)
CASES = 2


def case_arrays(index: int) -> tuple[np.ndarray, np.ndarray]:
    """Image (int16 HU) and labels (uint8) of case ``index``."""
    rng = np.random.default_rng(961 + index)
    z, y, x = np.ogrid[: SHAPE[0], : SHAPE[1], : SHAPE[2]]
    body = ((y - 256) / (200 - 8 * index)) ** 2 + ((x - 256) / 240) ** 2 <= 1.0
    body = np.broadcast_to(body, SHAPE)
    image = np.full(SHAPE, -1000.0)
    image[body] = 40.0
    fat = body & ~(((y - 256) / 185) ** 2 + ((x - 256) / 225) ** 2 <= 1.0)
    image[fat] = -100.0
    bone = (((y - 380) / 25) ** 2 + ((x - 256) / 30) ** 2 <= 1.0) & np.ones_like(z, bool)
    image[bone] = 700.0
    organ = ((y - 230) / 70) ** 2 + ((x - 300 - 5 * index) / 90) ** 2 + ((z - 10) / 12) ** 2 <= 1
    lesion = ((y - 220) / 15) ** 2 + ((x - 320) / 18) ** 2 + ((z - 9) / 4) ** 2 <= 1
    image[organ] = 60.0
    image[lesion] = 25.0
    image += rng.normal(0.0, 18.0, SHAPE)
    image[~body] = -1000.0 + rng.normal(0.0, 5.0, int((~body).sum()))
    labels = np.zeros(SHAPE, np.uint8)
    labels[organ] = 1
    labels[lesion] = 2
    return np.clip(np.round(image), -1024, 3071).astype(np.int16), labels


def write_dataset(raw_root: Path) -> Path:
    """``raw_root/Dataset961_CTLike`` with ``CASES`` training cases; returns that folder."""
    folder = Path(raw_root) / NAME
    (folder / "imagesTr").mkdir(parents=True, exist_ok=True)
    (folder / "labelsTr").mkdir(parents=True, exist_ok=True)
    dataset = {
        "channel_names": {"0": "CT"},
        "labels": {"background": 0, "organ": 1, "lesion": 2},
        "numTraining": CASES,
        "file_ending": ".nii.gz",
    }
    (folder / "dataset.json").write_text(json.dumps(dataset, indent=2))
    for index in range(CASES):
        image, labels = case_arrays(index)
        for array, path in (
            (image, folder / "imagesTr" / f"ct_{index:03d}_0000.nii.gz"),
            (labels, folder / "labelsTr" / f"ct_{index:03d}.nii.gz"),
        ):
            itk = sitk.GetImageFromArray(array)
            itk.SetSpacing(SPACING)
            sitk.WriteImage(itk, str(path), useCompression=True)
    return folder
