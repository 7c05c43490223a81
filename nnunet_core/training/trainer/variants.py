"""Upstream's trainer class names (``-tr``) as settings: epochs, mirroring, deep supervision.

Upstream selects behaviour by subclass name (``nnUNetTrainer_250epochs``,
``nnUNetTrainerNoMirroring``, ...). We have one trainer, so a name is parsed into what its
subclass changes; the name itself is kept (it names the results folder and the checkpoint's
``trainer_name``). Mirroring follows upstream: a variant's axes are used for the training
augmentation and stored as ``inference_allowed_mirroring_axes`` (None: no test-time mirroring),
which validation and ``predict`` read back. ``NoDeepSupervision`` trains on the full-resolution
output only (the network keeps every head, so checkpoints load either way); ``_noDummy2DDA``
augments anisotropic 3D patches in 3D. Importing this module never imports torch: the
workflow's config check calls it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.limits import MAX_EPOCHS

BASE = "nnUNetTrainer"
DEFAULT_EPOCHS = 1000

MIRROR_ALL = "all"  # every spatial axis (upstream's default)
MIRROR_NONE = "none"  # no mirroring in training, validation or inference
MIRROR_01 = "01"  # axes (0, 1) in 3D, (0,) in 2D (upstream's onlyMirror01)

_EPOCHS_RE = re.compile(rf"^{BASE}_([1-9][0-9]*)epochs(_NoMirroring)?$")

# fixed names -> (epochs, mirroring, deep supervision, dummy 2D augmentation allowed)
_FIXED: dict[str, tuple[int, str, bool, bool]] = {
    BASE: (DEFAULT_EPOCHS, MIRROR_ALL, True, True),
    f"{BASE}_1epoch": (1, MIRROR_ALL, True, True),
    f"{BASE}NoMirroring": (DEFAULT_EPOCHS, MIRROR_NONE, True, True),
    f"{BASE}_onlyMirror01": (DEFAULT_EPOCHS, MIRROR_01, True, True),
    f"{BASE}_onlyMirror01_1500ep": (1500, MIRROR_01, True, True),
    f"{BASE}NoDeepSupervision": (DEFAULT_EPOCHS, MIRROR_ALL, False, True),
    f"{BASE}_noDummy2DDA": (DEFAULT_EPOCHS, MIRROR_ALL, True, False),
}


@dataclass(frozen=True)
class TrainerVariant:
    """What a trainer name changes relative to ``nnUNetTrainer``."""

    name: str
    num_epochs: int
    mirroring: str = MIRROR_ALL
    deep_supervision: bool = True  # False: the loss sees only the full-resolution output
    dummy_2d: bool = True  # False: anisotropic 3D patches are augmented in 3D (+-30 deg)

    def mirror_axes(self, dim: int) -> tuple[int, ...] | None:
        """Mirror axes of a ``dim``-D patch, for augmentation and inference; None: none."""
        if dim not in (2, 3):
            msg = f"patch must be 2D or 3D, got {dim} dimensions"
            raise ConfigurationError(msg)
        if self.mirroring == MIRROR_NONE:
            return None
        if self.mirroring == MIRROR_01:
            return (0,) if dim == 2 else (0, 1)
        return tuple(range(dim))


def known_trainer_names() -> list[str]:
    """The accepted names and patterns, for help texts and error messages."""
    return [
        BASE,
        f"{BASE}_<N>epochs",
        f"{BASE}_1epoch",
        f"{BASE}_<N>epochs_NoMirroring",
        f"{BASE}NoMirroring",
        f"{BASE}_onlyMirror01",
        f"{BASE}_onlyMirror01_1500ep",
        f"{BASE}NoDeepSupervision",
        f"{BASE}_noDummy2DDA",
    ]


def parse_trainer_name(name: str) -> TrainerVariant:
    """The variant named ``name``; a ConfigurationError (one line, listing the names) otherwise."""
    if name in _FIXED:
        return TrainerVariant(name, *_FIXED[name])
    match = _EPOCHS_RE.match(name)
    if match is not None:
        mirroring = MIRROR_NONE if match.group(2) else MIRROR_ALL
        epochs = int(match.group(1))
        if epochs > MAX_EPOCHS:  # far beyond any real run: a typo (nnunet_core.training.limits)
            msg = f"trainer {name!r}: {epochs} epochs is more than the {MAX_EPOCHS} allowed"
            raise ConfigurationError(msg)
        return TrainerVariant(name, epochs, mirroring)
    msg = (
        f"unknown trainer {name!r} (known: {', '.join(known_trainer_names())}; N >= 1; or your "
        "own: package.module:Class, /path/to/file.py:Class, a Class in $nnUNet_extTrainer)"
    )
    raise ConfigurationError(msg)
