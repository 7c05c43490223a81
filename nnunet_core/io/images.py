"""Reading and writing a case's images through its reader (``nnunet_core.io.readers``).

Arrays are ``(c, z, y, x)`` float32 in SimpleITK's axis order whatever the reader (nibabel arrays
are transposed to it), so every later step is reader-agnostic. Callers that know the dataset pass
its reader (from ``dataset.json`` or the plans); without one, reading tries upstream's readers for
the file's ending in upstream's order (SimpleITK for endings only ITK knows, e.g. ``.nhdr``) and
writing picks the writer that matches what the properties carry (``nibabel_stuff``,
``sitk_stuff``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.readers import ImageReader, reader_for_properties
from nnunet_core.io.readers.natural_io import NaturalImage2DIO, Tiff3DIO
from nnunet_core.io.readers.registry import BY_ENDING_ORDER, supported_endings
from nnunet_core.io.readers.sitk_io import SimpleITKIO, read_sitk

__all__ = ["read_images", "read_seg", "read_sitk", "readers_for_file", "write_seg"]


def readers_for_file(path: str | Path) -> list[ImageReader]:
    """Upstream's readers for this file's ending, in its order; SimpleITK where none claims it."""
    name = Path(path).name.lower()
    ending = max((e for e in supported_endings() if name.endswith(e)), key=len, default=None)
    if ending is None:
        return [SimpleITKIO()]
    return [cls() for cls in BY_ENDING_ORDER if ending in cls.endings]


def _first_that_reads(readers: list[ImageReader], read: Callable[[ImageReader], Any]) -> Any:
    """Upstream's probing: the first reader that reads the file wins (a 3-D .tif: Tiff3DIO)."""
    first_error: DatasetError | None = None
    for reader in readers:
        try:
            return read(reader)
        except DatasetError as exc:
            first_error = first_error or exc
    assert first_error is not None
    raise first_error


def read_images(
    paths: list[str | Path], reader: ImageReader | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the channel files of one case into ``(c, z, y, x)`` float32 plus properties."""
    if not paths:
        msg = "read_images needs at least one file"
        raise DatasetError(msg)
    readers = [reader] if reader else readers_for_file(paths[0])
    return _first_that_reads(readers, lambda r: r.read_images(paths))


def read_seg(
    path: str | Path, reader: ImageReader | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a label map as ``(1, z, y, x)`` plus properties."""
    readers = [reader] if reader else readers_for_file(path)
    return _first_that_reads(readers, lambda r: r.read_seg(path))


def write_seg(
    seg: np.ndarray,
    path: str | Path,
    properties: dict[str, Any],
    reader: ImageReader | None = None,
) -> None:
    """Write a ``(z, y, x)`` label map (``(1, y, x)`` for 2-D) in the geometry of ``properties``.

    Atomic (the writer renames a complete temporary file into place, sidecars included).
    """
    writer = reader or reader_for_properties(properties, Path(path).name)
    if reader is None and isinstance(writer, NaturalImage2DIO) and np.asarray(seg).shape[0] > 1:
        writer = Tiff3DIO()  # .tif without geometry: a 3-D label map is a tiff stack
    writer.write_seg(seg, path, properties)
