"""Readers without world geometry: upstream's ``NaturalImage2DIO`` and ``Tiff3DIO``.

``NaturalImage2DIO`` reads 2-D png/bmp/tif through scikit-image; an RGB(A) file gives 3 (4)
channels, as upstream does, and the spacing is always ``(999, 1, 1)``. ``Tiff3DIO`` reads 3-D
tiffs through tifffile; their spacing lives in a ``.json`` beside them (``CASE.json`` for the
images ``CASE_XXXX.tif`` and the label ``CASE.tif``), ``(1, 1, 1)`` when it is missing, and its
writer leaves such a file beside every segmentation it writes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.readers.base import (
    FileImage,
    ImageReader,
    label_dtype,
    missing_file,
    stack_channels,
    unreadable,
)

NATURAL_SPACING = (999, 1, 1)
CHANNEL_SUFFIX_LENGTH = len("_0000")


class NaturalImage2DIO(ImageReader):
    """2-D natural images; RGB(A) pixels become channels."""

    name = "NaturalImage2DIO"
    endings = (".png", ".bmp", ".tif")

    def read_file(self, path: Path) -> FileImage:
        path = Path(path)
        if not path.is_file():
            raise missing_file(path)
        from skimage import io as skio  # here: a second per process, png datasets only

        try:
            pixels = skio.imread(str(path))
        except Exception as exc:  # imageio/PIL raise many types for broken files
            raise unreadable(path, exc) from None
        if pixels.ndim == 3 and pixels.shape[-1] in (3, 4):
            array = pixels.transpose(2, 0, 1)[:, None]
        elif pixels.ndim == 2:
            array = pixels[None, None]
        else:
            msg = (
                f"{path}: image of shape {pixels.shape}; NaturalImage2DIO reads 2-D grey, RGB or "
                "RGBA images"
            )
            raise DatasetError(msg)
        return FileImage(array, {"spacing": list(NATURAL_SPACING)}, 2, {})

    def write_file(self, seg: np.ndarray, path: Path, _properties: dict[str, Any]) -> None:
        from skimage import io as skio

        array = np.asarray(seg)[0]
        skio.imsave(str(path), array.astype(label_dtype(array), copy=False), check_contrast=False)


def _spacing_file(path: Path, strip: int) -> Path:
    """``CASE.json`` beside ``CASE_XXXX.tiff`` (``strip`` = 5) or ``CASE.tiff`` (0)."""
    stem = path.name[: -len(path.suffix)]
    return path.with_name(stem[: len(stem) - strip] + ".json")


def _spacing(json_path: Path, what: Sequence[Path]) -> list[Any]:
    if not json_path.is_file():
        names = ", ".join(str(p) for p in what)
        print(
            f"warning: no spacing file {json_path} for {names}; assuming spacing (1, 1, 1)",
            file=sys.stderr,
        )
        return [1, 1, 1]
    try:
        spacing = read_json(json_path)["spacing"]
    except (ValueError, KeyError, TypeError):
        msg = f"{json_path}: expected a JSON object with 'spacing': [z, y, x]"
        raise DatasetError(msg) from None
    if (
        not isinstance(spacing, list)
        or len(spacing) != 3
        or not all(isinstance(s, (int, float)) and s > 0 for s in spacing)
    ):
        msg = f"{json_path}: 'spacing' must be 3 positive numbers, got {spacing!r}"
        raise DatasetError(msg)
    return spacing


class Tiff3DIO(ImageReader):
    """3-D tiff stacks, spacing from the ``.json`` beside them (tiff metadata is ignored)."""

    name = "Tiff3DIO"
    endings = (".tif", ".tiff")

    def _pixels(self, path: Path) -> np.ndarray:
        if not path.name.lower().endswith(self.endings):
            msg = f"{path}: Tiff3DIO reads {', '.join(self.endings)} files only"
            raise DatasetError(msg)
        if not path.is_file():
            raise missing_file(path)
        import tifffile  # here: only tiff datasets pay its import

        try:
            pixels = tifffile.imread(str(path))
        except Exception as exc:  # tifffile raises TiffFileError, ValueError, OSError
            raise unreadable(path, exc) from None
        if pixels.ndim != 3:
            msg = f"{path}: {pixels.ndim}-D tiff; Tiff3DIO reads 3-D images (2-D: NaturalImage2DIO)"
            raise DatasetError(msg)
        return pixels[None]

    def read_file(self, path: Path) -> FileImage:
        path = Path(path)
        pixels = self._pixels(path)
        spacing = _spacing(_spacing_file(path, CHANNEL_SUFFIX_LENGTH), [path])
        return FileImage(pixels, {"spacing": spacing}, 3, {})

    def read_images(self, paths: Sequence[str | Path]) -> tuple[np.ndarray, dict[str, Any]]:
        paths = [Path(p) for p in paths]
        data = stack_channels([self._pixels(p) for p in paths], paths)
        spacing = _spacing(_spacing_file(paths[0], CHANNEL_SUFFIX_LENGTH), paths)
        return data, {"spacing": spacing}

    def read_label_file(self, path: Path) -> FileImage:
        path = Path(path)
        pixels = self._pixels(path)
        return FileImage(pixels, {"spacing": _spacing(_spacing_file(path, 0), [path])}, 3, {})

    def write_file(self, seg: np.ndarray, path: Path, _properties: dict[str, Any]) -> None:
        import tifffile

        array = np.asarray(seg)
        tifffile.imwrite(
            str(path), data=array.astype(label_dtype(array), copy=False), compression="zlib"
        )

    def write_sidecar(self, path: Path, properties: dict[str, Any]) -> None:
        write_json(_spacing_file(path, 0), {"spacing": list(properties["spacing"])})
