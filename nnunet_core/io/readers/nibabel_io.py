"""nibabel readers: upstream's ``NibabelIO`` and ``NibabelIOWithReorient`` (3-D NIfTI only).

nibabel indexes voxels ``(i, j, k)`` = ITK's ``(x, y, z)``, so arrays are transposed to
``(k, j, i)`` and the zooms reversed, to match SimpleITK's axis order as upstream does. The
affines go into ``properties['nibabel_stuff']`` as nested lists (JSON, not pickled arrays); the
writer puts the transpose back and saves with the original affine. The Reorient variant reads the
image turned to RAS (``as_reoriented(io_orientation(affine))``) and writes back by the inverse turn,
so the written file has the input's voxel order and affine.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.lazy_modules import lazy_module
from nnunet_core.io.readers.base import (
    FileImage,
    ImageReader,
    label_dtype,
    missing_file,
    unreadable,
)

if TYPE_CHECKING:
    import nibabel
else:  # loaded at the first image read or written
    nibabel = lazy_module("nibabel")


def load_nifti(path: Path) -> nibabel.Nifti1Image:
    """A 3-D NIfTI image; anything else is a one-line DatasetError naming the file."""
    if not path.is_file():
        raise missing_file(path)
    try:
        image = nibabel.load(str(path))
    except Exception as exc:  # nibabel raises many types (ImageFileError, EOFError, zlib.error)
        raise unreadable(path, exc) from None
    if image.ndim != 3:
        msg = f"{path}: {image.ndim}-D image; the nibabel readers read 3-D NIfTI only"
        raise DatasetError(msg)
    return image


def _voxels(image: nibabel.Nifti1Image, path: Path) -> np.ndarray:
    try:
        return np.asarray(image.get_fdata(), dtype=np.float32).transpose(2, 1, 0)[None]
    except Exception as exc:
        raise unreadable(path, exc) from None


def _file_image(image: nibabel.Nifti1Image, path: Path, stuff: dict[str, Any]) -> FileImage:
    spacing = [float(z) for z in image.header.get_zooms()[::-1]]
    array = _voxels(image, path)
    affine = np.asarray(image.affine, dtype=np.float64)
    properties = {"nibabel_stuff": stuff, "spacing": spacing}
    return FileImage(array, properties, 3, {"affine": tuple(affine.ravel().tolist())})


def _nifti(seg: np.ndarray, affine: Any) -> nibabel.Nifti1Image:
    array = np.asarray(seg).transpose(2, 1, 0)
    return nibabel.Nifti1Image(
        array.astype(label_dtype(array), copy=False), affine=np.asarray(affine, dtype=np.float64)
    )


class NibabelIO(ImageReader):
    """NIfTI through nibabel, voxel order as stored (upstream's only reader for ``.nii``)."""

    name = "NibabelIO"
    endings = (".nii", ".nii.gz")

    def read_file(self, path: Path) -> FileImage:
        image = load_nifti(Path(path))
        return _file_image(image, Path(path), {"original_affine": image.affine.tolist()})

    def write_file(self, seg: np.ndarray, path: Path, properties: dict[str, Any]) -> None:
        nibabel.save(_nifti(seg, properties["nibabel_stuff"]["original_affine"]), str(path))


class NibabelIOWithReorient(NibabelIO):
    """NIfTI through nibabel, turned to RAS for the method and back for the results."""

    name = "NibabelIOWithReorient"

    def read_file(self, path: Path) -> FileImage:
        image = load_nifti(Path(path))
        original = image.affine
        reoriented = image.as_reoriented(nibabel.orientations.io_orientation(original))
        stuff = {
            "original_affine": original.tolist(),
            "reoriented_affine": reoriented.affine.tolist(),
        }
        return _file_image(reoriented, Path(path), stuff)

    def write_file(self, seg: np.ndarray, path: Path, properties: dict[str, Any]) -> None:
        stuff = properties["nibabel_stuff"]
        back = nibabel.orientations.ornt_transform(
            nibabel.orientations.axcodes2ornt("RAS"),
            nibabel.orientations.io_orientation(np.asarray(stuff["original_affine"])),
        )
        nibabel.save(_nifti(seg, stuff["reoriented_affine"]).as_reoriented(back), str(path))
