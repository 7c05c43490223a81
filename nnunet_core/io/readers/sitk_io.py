"""SimpleITK readers: upstream's ``SimpleITKIO`` and ``SimpleITKIOWithReorient``.

Arrays are numpy order ``(z, y, x)``, ITK's ``(x, y, z)`` reversed, and so is the spacing. 2-D
images become ``(c, 1, y, x)`` with spacing ``(999 * max(spacing), sy, sx)`` as upstream does, so
2-D cases run through the same 3-D code. ``properties['sitk_stuff']`` keeps the ITK geometry for
writing results back. The Reorient variant turns every image to RAS (``DICOMOrient``) on reading
and back to the file's own orientation on writing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.lazy_modules import lazy_module
from nnunet_core.io.readers.base import FileImage, ImageReader, label_dtype, missing_file

if TYPE_CHECKING:
    import SimpleITK as sitk
else:  # loaded at the first image read or written
    sitk = lazy_module("SimpleITK")


def itk_reason(exc: RuntimeError) -> str:
    """The ``ITK ERROR: ...`` line of an ITK exception (its ``Reason:`` errno is often bogus)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("ITK ERROR:"):
            return line.split("): ", 1)[-1][:200]
    return (lines[-1] if lines else "unknown reason")[:200]


@contextmanager
def native_stderr_silenced() -> Iterator[None]:
    """Drop what C++ readers (MetaIO, NRRD) print to fd 2: our one-line message says it all."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def read_sitk(path: str | Path, quiet: bool = False) -> sitk.Image:
    """Read one file; a missing or corrupt file raises a one-line DatasetError naming it.

    ``quiet`` drops what ITK prints to fd 2 (MetaIO, NRRD) while reading.
    """
    path = Path(path)
    if not path.is_file():
        raise missing_file(path)
    try:
        if not quiet:
            return sitk.ReadImage(str(path))
        with native_stderr_silenced():
            return sitk.ReadImage(str(path))
    except RuntimeError as exc:
        msg = f"{path}: unreadable or corrupt image ({itk_reason(exc)})"
        raise DatasetError(msg) from None


def sitk_geometry(image: sitk.Image) -> dict[str, Any]:
    """ITK geometry as plain lists (``sitk_stuff`` in upstream's properties)."""
    return {
        "spacing": list(image.GetSpacing()),
        "origin": list(image.GetOrigin()),
        "direction": list(image.GetDirection()),
    }


def image_to_array(image: sitk.Image, path: str | Path) -> tuple[np.ndarray, list[float]]:
    """``(1, z, y, x)`` array (dtype kept) and nnU-Net spacing ``(z, y, x)``."""
    if image.GetNumberOfComponentsPerPixel() != 1:
        msg = f"{path}: multi-component (RGB/vector) pixels; store one channel per file"
        raise DatasetError(msg)
    array = sitk.GetArrayFromImage(image)
    spacing = [abs(float(s)) for s in image.GetSpacing()][::-1]
    if array.ndim == 2:
        return array[None, None], [999.0 * max(spacing), *spacing]
    if array.ndim == 3:
        return array[None], spacing
    msg = f"{path}: {array.ndim}-D image; expected 2-D or 3-D (one file per channel)"
    raise DatasetError(msg)


def effective_ndim(image: sitk.Image) -> int:
    """2 for 2-D files and for 3-D files with a single slice (upstream treats both as 2-D)."""
    if image.GetDimension() == 2 or (image.GetDimension() == 3 and image.GetSize()[2] == 1):
        return 2
    return image.GetDimension()


class SimpleITKIO(ImageReader):
    """Any format ITK reads; upstream picks it for .nii.gz, .nrrd, .mha and .gipl."""

    name = "SimpleITKIO"
    endings = (".nii.gz", ".nrrd", ".mha", ".gipl")

    def load(self, path: Path) -> tuple[sitk.Image, dict[str, Any]]:
        """The ITK image as this reader sees it and its ``sitk_stuff``."""
        image = read_sitk(path, self.quiet)
        return image, sitk_geometry(image)

    def read_file(self, path: Path) -> FileImage:
        image, stuff = self.load(Path(path))
        array, spacing = image_to_array(image, path)
        geometry = {
            "spacing": tuple(image.GetSpacing()[::-1]),
            "origin": tuple(image.GetOrigin()[::-1]),
            "direction": tuple(image.GetDirection()),
        }
        properties = {"sitk_stuff": stuff, "spacing": spacing}
        shape = tuple(int(v) for v in image.GetSize()[::-1])
        return FileImage(array, properties, effective_ndim(image), geometry, shape)

    def image_from(self, seg: np.ndarray, properties: dict[str, Any]) -> sitk.Image:
        geometry = properties["sitk_stuff"]
        array = np.asarray(seg)
        if len(geometry["spacing"]) == 2 and array.ndim == 3:
            array = array[0]
        image = sitk.GetImageFromArray(array.astype(label_dtype(array), copy=False))
        image.SetSpacing([float(v) for v in geometry["spacing"]])
        image.SetOrigin([float(v) for v in geometry["origin"]])
        image.SetDirection([float(v) for v in geometry["direction"]])
        return image

    def write_file(self, seg: np.ndarray, path: Path, properties: dict[str, Any]) -> None:
        sitk.WriteImage(self.image_from(seg, properties), str(path), useCompression=True)


class SimpleITKIOWithReorient(SimpleITKIO):
    """SimpleITK reading reoriented to RAS; ``sitk_stuff`` also keeps the file's orientation."""

    name = "SimpleITKIOWithReorient"
    ORIENTATION = "RAS"

    def load(self, path: Path) -> tuple[sitk.Image, dict[str, Any]]:
        image = read_sitk(path, self.quiet)
        try:
            original = sitk.DICOMOrientImageFilter.GetOrientationFromDirectionCosines(
                image.GetDirection()
            )
            image = sitk.DICOMOrient(image, self.ORIENTATION)
        except RuntimeError as exc:
            msg = f"{path}: cannot reorient to {self.ORIENTATION} ({itk_reason(exc)})"
            raise DatasetError(msg) from None
        return image, {**sitk_geometry(image), "original_orientation": original}

    def write_file(self, seg: np.ndarray, path: Path, properties: dict[str, Any]) -> None:
        image = self.image_from(seg, properties)
        image = sitk.DICOMOrient(image, properties["sitk_stuff"]["original_orientation"])
        sitk.WriteImage(image, str(path), useCompression=True)
