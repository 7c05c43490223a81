"""Image reading and writing through SimpleITK, in nnU-Net's axis order.

Arrays are ``(c, z, y, x)`` float32 (numpy order, i.e. ITK's (x, y, z) reversed). 2-D images
become ``(c, 1, y, x)`` with spacing ``(999 * max(spacing), sy, sx)`` as upstream does, so the
2-D case runs through the same 3-D code. ``properties['sitk_stuff']`` keeps the ITK geometry for
writing results back in the input's space.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from nnunet_core.errors import DatasetError

SUPPORTED_FILE_ENDINGS = (".nii.gz", ".nii", ".mha", ".nrrd", ".nhdr", ".gipl", ".gipl.gz", ".png")


def read_sitk(path: str | Path) -> sitk.Image:
    """Read one file; a missing or corrupt file raises a one-line DatasetError naming it."""
    path = Path(path)
    if not path.is_file():
        msg = f"{path}: file not found"
        raise DatasetError(msg)
    try:
        return sitk.ReadImage(str(path))
    except RuntimeError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "unknown reason"
        msg = f"{path}: unreadable or corrupt image ({reason[:160]})"
        raise DatasetError(msg) from None


def geometry_of(image: sitk.Image) -> dict[str, Any]:
    """ITK geometry as plain lists (``sitk_stuff`` in upstream's properties)."""
    return {
        "spacing": list(image.GetSpacing()),
        "origin": list(image.GetOrigin()),
        "direction": list(image.GetDirection()),
    }


def image_to_array(image: sitk.Image, path: str | Path) -> tuple[np.ndarray, list[float]]:
    """Return ``(1, z, y, x)`` array and nnU-Net spacing ``(z, y, x)``."""
    if image.GetNumberOfComponentsPerPixel() != 1:
        msg = f"{path}: multi-component (vector/RGB) pixels are not supported; store one channel per file"
        raise DatasetError(msg)
    array = sitk.GetArrayFromImage(image)
    spacing = list(image.GetSpacing())[::-1]
    if array.ndim == 2:
        return array[None, None], [999.0 * max(spacing), *spacing]
    if array.ndim == 3:
        return array[None], spacing
    msg = f"{path}: {array.ndim}-D image; expected 2-D or 3-D (one file per channel)"
    raise DatasetError(msg)


def read_images(paths: list[str | Path]) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the channel files of one case into ``(c, z, y, x)`` float32 plus properties.

    All channels must share the same shape; geometry checks belong to ``verify``.
    """
    arrays = []
    spacing: list[float] | None = None
    geometry: dict[str, Any] | None = None
    for path in paths:
        image = read_sitk(path)
        array, this_spacing = image_to_array(image, path)
        if arrays and array.shape != arrays[0].shape:
            msg = f"{path}: shape {array.shape[1:]} differs from channel 0 {arrays[0].shape[1:]}"
            raise DatasetError(msg)
        arrays.append(array)
        if spacing is None:
            spacing, geometry = this_spacing, geometry_of(image)
    data = np.vstack(arrays).astype(np.float32, copy=False)
    return data, {"sitk_stuff": geometry, "spacing": spacing}


def read_seg(path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a label map as ``(1, z, y, x)`` (dtype kept) plus properties."""
    image = read_sitk(path)
    array, spacing = image_to_array(image, path)
    return array, {"sitk_stuff": geometry_of(image), "spacing": spacing}


def write_seg(seg: np.ndarray, path: str | Path, properties: dict[str, Any]) -> None:
    """Write a ``(z, y, x)`` label map with the geometry in ``properties['sitk_stuff']``."""
    array = np.asarray(seg)
    geometry = properties["sitk_stuff"]
    if len(geometry["spacing"]) == 2 and array.ndim == 3:
        array = array[0]
    dtype = np.uint8 if array.max(initial=0) < 256 and array.min(initial=0) >= 0 else np.int16
    image = sitk.GetImageFromArray(array.astype(dtype, copy=False))
    image.SetSpacing(geometry["spacing"])
    image.SetOrigin(geometry["origin"])
    image.SetDirection(geometry["direction"])
    sitk.WriteImage(image, str(path), useCompression=True)
