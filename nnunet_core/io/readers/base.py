"""What every image reader/writer offers, and the checks they share.

A reader turns the channel files of one case into ``(c, z, y, x)`` float32 plus a JSON-ready
properties dict (nnU-Net's spacing in array order, and whatever its writer needs to put a
segmentation back into the input's geometry). Names and choices follow upstream's
``BaseReaderWriter`` family so that plans and datasets are interchangeable with nnU-Net.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import atomic_path


@dataclass
class FileImage:
    """One file read: array ``(c, z, y, x)``, its case properties and geometry for verify.

    ``properties`` is what ``read_images`` returns for a case whose channel 0 is this file.
    ``geometry`` maps a name (``spacing``, ``origin``, ``direction``, ``affine``) to numbers that
    must agree between a case's files; ``ndim`` is the file's own dimensionality (2 or 3).
    """

    array: np.ndarray
    properties: dict[str, Any]
    ndim: int
    geometry: dict[str, tuple[float, ...]] = field(default_factory=dict)
    shape: tuple[int, ...] | None = None  # the file's own shape (numpy order) where it differs

    @property
    def file_shape(self) -> tuple[int, ...]:
        return self.shape if self.shape is not None else tuple(self.array.shape[1:])

    @property
    def spacing(self) -> list[float]:
        return list(self.properties["spacing"])


def label_dtype(seg: np.ndarray) -> type:
    """Upstream's writer dtype: uint8 below 255, else uint16 (int16 for negative values)."""
    if seg.size and seg.min() < 0:
        return np.int16
    return np.uint8 if seg.size == 0 or seg.max() < 255 else np.uint16


def missing_file(path: Path) -> DatasetError:
    return DatasetError(f"{path}: file not found")


def unreadable(path: Path, reason: object) -> DatasetError:
    text = str(reason).strip().splitlines()
    return DatasetError(
        f"{path}: unreadable or corrupt image ({(text[-1] if text else 'unknown reason')[:160]})"
    )


def stack_channels(arrays: Sequence[np.ndarray], paths: Sequence[Path]) -> np.ndarray:
    """Concatenate per-file ``(c, z, y, x)`` arrays; every file must have channel 0's shape."""
    for array, path in zip(arrays[1:], paths[1:], strict=True):
        if array.shape[1:] != arrays[0].shape[1:]:
            msg = (
                f"{path}: shape {array.shape[1:]} differs from channel 0 {arrays[0].shape[1:]} "
                f"({paths[0]})"
            )
            raise DatasetError(msg)
    return np.vstack(arrays, dtype=np.float32, casting="unsafe")


def same_spacing(spacings: Sequence[Sequence[float]], paths: Sequence[Path]) -> None:
    for spacing, path in zip(spacings[1:], paths[1:], strict=True):
        if not np.allclose(spacing, spacings[0]):
            msg = (
                f"{path}: spacing {list(spacing)} differs from channel 0 {list(spacings[0])} "
                f"({paths[0]})"
            )
            raise DatasetError(msg)


class ImageReader(ABC):
    """One upstream reader/writer: ``name`` is upstream's class name, as plans store it."""

    name: ClassVar[str]
    endings: ClassVar[tuple[str, ...]]
    quiet: bool = False  # verify sets it: native libraries' own error prints are dropped

    @abstractmethod
    def read_file(self, path: Path) -> FileImage:
        """One file; raises a one-line DatasetError naming it when it cannot be read."""

    @abstractmethod
    def write_file(self, seg: np.ndarray, path: Path, properties: dict[str, Any]) -> None:
        """Write a ``(z, y, x)`` label map to ``path`` in the geometry of ``properties``."""

    def read_label_file(self, path: Path) -> FileImage:
        """A label file (differs from ``read_file`` only where a format keys files by case)."""
        return self.read_file(path)

    def read_images(self, paths: Sequence[str | Path]) -> tuple[np.ndarray, dict[str, Any]]:
        """The channel files of one case as ``(c, z, y, x)`` float32 plus properties."""
        paths = [Path(p) for p in paths]
        files = [self.read_file(p) for p in paths]
        same_spacing([f.spacing for f in files], paths)
        data = stack_channels([f.array for f in files], paths)
        return data, files[0].properties

    def read_seg(self, path: str | Path) -> tuple[np.ndarray, dict[str, Any]]:
        """A label map as ``(1, z, y, x)`` plus the same properties as for images."""
        path = Path(path)
        image = self.read_label_file(path)
        return image.array, image.properties

    def write_seg(self, seg: np.ndarray, path: str | Path, properties: dict[str, Any]) -> None:
        """Write atomically (a temporary name with the same ending, then renamed)."""
        path = Path(path)
        ending = next((e for e in self.endings if path.name.lower().endswith(e)), path.suffix)
        with atomic_path(path, suffix=ending) as tmp:
            self.write_file(np.asarray(seg), tmp, properties)
        self.write_sidecar(path, properties)

    def write_sidecar(self, path: Path, properties: dict[str, Any]) -> None:
        """Files a format keeps next to the image (Tiff3DIO's spacing); none by default."""
        del path, properties

    def can_read(self, path: Path) -> bool:
        """Whether this reader reads ``path`` (upstream probes an example file this way)."""
        try:
            self.read_file(path)
        except (DatasetError, OSError, ValueError, RuntimeError):
            return False
        return True
