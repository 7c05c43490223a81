"""How large a model archive may unpack, checked from its headers before anything is extracted.

A zip's central directory declares each member's uncompressed size, and ``zipfile`` never hands
out more than that (a member whose data runs longer fails its CRC check at the declared end, and
``install`` counts the bytes it copies besides), so the declared sizes bound what unpacking
writes. Two limits stop a zip bomb (a small archive that fills the disk):

- the total declared size: ``DEFAULT_MAX_SIZE_GIB`` (20 GiB). nnU-Net models are a few GB (a
  checkpoint of a large 3D network with its optimizer state is about 0.5-1.2 GB; five folds of
  ``checkpoint_final.pth``, or of two checkpoints, and the validation outputs of
  ``--exp_cv_preds``, stay well below), and 20 GiB is still far below the disks models are
  installed on. ``--max-size-gb`` raises it.
- each member's compression ratio (declared size / compressed size): at most
  ``DEFAULT_MAX_RATIO`` (200:1) for members above ``RATIO_FLOOR_BYTES`` (16 MiB). Checkpoints
  (float weights) compress about 1.1:1, JSON about 10:1, NIfTI and ``.npz`` are compressed
  already; deflate reaches about 1000:1 only on repetitive filler such as a bomb's. Small members
  (JSON, summaries) are never refused for their ratio. ``--max-ratio`` raises it.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.errors import ConfigurationError

GIB = 1 << 30
DEFAULT_MAX_SIZE_GIB = 20.0
DEFAULT_MAX_RATIO = 200.0
RATIO_FLOOR_BYTES = 16 << 20


@dataclass(frozen=True)
class ArchiveLimits:
    """The most an archive may unpack to, in total and per compressed byte of a member."""

    max_size_gib: float = DEFAULT_MAX_SIZE_GIB
    max_ratio: float = DEFAULT_MAX_RATIO

    def __post_init__(self) -> None:
        if not self.max_size_gib > 0 or not self.max_ratio >= 1:
            msg = (
                f"--max-size-gb must be > 0 and --max-ratio >= 1, got {self.max_size_gib} and "
                f"{self.max_ratio}"
            )
            raise ConfigurationError(msg)

    @property
    def max_size_bytes(self) -> int:
        return int(self.max_size_gib * GIB)


def _gib(size: int) -> str:
    return f"{size / GIB:.2f} GiB"


def check_limits(
    archive: Path,
    infos: Sequence[zipfile.ZipInfo],
    limits: ArchiveLimits,
    *,
    how_to_raise: str | None = None,
    outcome: str = "nothing was installed",
) -> None:
    """One-line ConfigurationError naming the archive and the member or total over a limit.

    ``how_to_raise``: what lifts the limit hit (default: the install command's flag for it);
    ``outcome``: what the refusal left undone.
    """
    for info in infos:
        if info.is_dir() or info.file_size <= RATIO_FLOOR_BYTES:
            continue
        ratio = info.file_size / max(info.compress_size, 1)
        if ratio > limits.max_ratio:
            msg = (
                f"{archive}: member {info.filename!r} declares an unpacked size of "
                f"{_gib(info.file_size)} from {info.compress_size} bytes (ratio {ratio:.0f}:1, "
                f"the limit is {limits.max_ratio:g}:1; {how_to_raise or '--max-ratio raises it'}"
                f"); {outcome}"
            )
            raise ConfigurationError(msg)
    total = sum(info.file_size for info in infos)
    if total > limits.max_size_bytes:
        msg = (
            f"{archive}: would unpack {_gib(total)} in {len(infos)} members (the limit is "
            f"{limits.max_size_gib:g} GiB; {how_to_raise or '--max-size-gb raises it'}); "
            f"{outcome}"
        )
        raise ConfigurationError(msg)
