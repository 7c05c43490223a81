"""Tiny NIfTI files for the dataset-conversion tests (convert-msd, convert-old-dataset): written
with a rotated direction, so that a direction dropped or transposed by a converter shows, and read
back as file lists and geometry to compare with upstream's output."""

from __future__ import annotations

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
