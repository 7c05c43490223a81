"""``{case}.npz`` probabilities handed to us (``ensemble -i``, a model's validation), read with
one line naming the file and what is wrong.

``np.load`` never unpickles here (``allow_pickle=False``): an object array could run code when
it is loaded. ``probabilities_header`` reads only the zip directory and the array's header, so a
whole folder is checked before anything is written: a file that is no zip archive (empty,
truncated, text), an archive without ``probabilities``, an object or non-float array, or a shape
that the member's size cannot hold. What only reading the data shows (a damaged deflate stream
inside an intact archive) is found by ``load_probabilities``, also as one line.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from nnunet_core.errors import DatasetError

KEY = "probabilities"
MEMBER = f"{KEY}.npy"
# what reading an archive can raise beyond our own checks: a bad zip, a short or unreadable
# file, a bad deflate stream, a bad .npy header (ValueError), no memory for a forged shape
_UNREADABLE = (zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError, MemoryError)
_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def _unreadable(path: Path, exc: BaseException) -> DatasetError:
    return DatasetError(f"{path}: not a readable .npz archive (truncated or damaged: {exc})")


def _check_dtype(path: Path, dtype: np.dtype) -> None:
    if dtype.hasobject:
        msg = (
            f"{path}: '{KEY}' holds Python objects (dtype object), which are never unpickled "
            "(that can run code); expected floating-point probabilities"
        )
        raise DatasetError(msg)
    if dtype.kind != "f":
        msg = f"{path}: '{KEY}' is {dtype}, not floating-point probabilities"
        raise DatasetError(msg)


def probabilities_header(path: str | os.PathLike) -> tuple[int, ...]:
    """The shape of ``path``'s ``probabilities`` after checking archive, key, dtype and size,
    without reading the array."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if MEMBER not in names:
                keys = ", ".join(n.removesuffix(".npy") for n in names) or "none"
                msg = f"{path}: no '{KEY}' array (keys: {keys})"
                raise DatasetError(msg)
            size = archive.getinfo(MEMBER).file_size
            with archive.open(MEMBER) as handle:
                version = np.lib.format.read_magic(handle)
                if version not in _HEADER_READERS:
                    msg = f"{path}: '{KEY}' is a .npy of version {version}, not 1.0 or 2.0"
                    raise DatasetError(msg)
                shape, _fortran, dtype = _HEADER_READERS[version](handle)
                offset = handle.tell()
    except DatasetError:
        raise
    except _UNREADABLE as exc:
        raise _unreadable(path, exc) from None
    _check_dtype(path, dtype)
    if offset + math.prod(shape) * dtype.itemsize != size:
        msg = f"{path}: '{KEY}' claims shape {shape} of {dtype}, which its {size} bytes do not hold"
        raise DatasetError(msg)
    return tuple(shape)


def load_probabilities(path: str | os.PathLike) -> np.ndarray:
    """``path``'s ``probabilities`` array (never unpickled); one line if it cannot be read."""
    path = Path(path)
    probabilities_header(path)  # the archive, key, dtype and size, each with its own line
    try:
        with np.load(path, allow_pickle=False) as content:
            return content[KEY]
    except _UNREADABLE as exc:
        raise _unreadable(path, exc) from None
