"""nnunet_core: nnU-Net v2's self-configuring segmentation method, driven by Snakemake.

The public API is what this module exports: ``from nnunet_core import Trainer`` is the stable
base class of a fold's training. It is loaded on first use, so that ``import nnunet_core`` (and
every light command such as ``nnunet-core verify``) does not pay for importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Trainer", "__version__"]

if TYPE_CHECKING:
    from nnunet_core.training.trainer import Trainer

# name -> module that defines it (loaded lazily by __getattr__)
_PUBLIC = {"Trainer": "nnunet_core.training.trainer"}


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        msg = f"module 'nnunet_core' has no attribute {name!r}"
        raise AttributeError(msg)
    import importlib

    return getattr(importlib.import_module(_PUBLIC[name]), name)
