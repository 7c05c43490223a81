"""Reading and writing a case's images through its reader (``nnunet_core.io.readers``).

Arrays are ``(c, z, y, x)`` float32 in SimpleITK's axis order whatever the reader (nibabel arrays
are transposed to it), so every later step is reader-agnostic. Callers that know the dataset pass
its reader (from ``dataset.json`` or the plans); without one, reading picks upstream's reader for
the file's ending (SimpleITK for endings only ITK knows, e.g. ``.nhdr``) and writing picks the
writer that matches what the properties carry (``nibabel_stuff``, ``sitk_stuff``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.readers import ImageReader, reader_for_properties
from nnunet_core.io.readers.registry import READERS, name_for_ending, supported_endings
from nnunet_core.io.readers.sitk_io import SimpleITKIO, read_sitk

__all__ = ["read_images", "read_seg", "read_sitk", "reader_for_file", "write_seg"]


def reader_for_file(path: str | Path) -> ImageReader:
    """Upstream's reader for this file's ending; SimpleITK where no reader claims the ending."""
    name = Path(path).name.lower()
    ending = max((e for e in supported_endings() if name.endswith(e)), key=len, default=None)
    if ending is None:
        return SimpleITKIO()
    return READERS[name_for_ending(ending)]()


def read_images(
    paths: list[str | Path], reader: ImageReader | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read the channel files of one case into ``(c, z, y, x)`` float32 plus properties."""
    if not paths:
        msg = "read_images needs at least one file"
        raise DatasetError(msg)
    reader = reader or reader_for_file(paths[0])
    return reader.read_images(paths)


def read_seg(
    path: str | Path, reader: ImageReader | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Read a label map as ``(1, z, y, x)`` plus properties."""
    return (reader or reader_for_file(path)).read_seg(path)


def write_seg(
    seg: np.ndarray,
    path: str | Path,
    properties: dict[str, Any],
    reader: ImageReader | None = None,
) -> None:
    """Write a ``(z, y, x)`` label map (``(1, y, x)`` for 2-D) in the geometry of ``properties``."""
    name = Path(path).name
    writer = reader or reader_for_properties(
        properties, name[name.find(".") :] if "." in name else ""
    )
    writer.write_seg(seg, path, properties)
