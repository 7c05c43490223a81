"""The torch device of a process from ``-device`` (train and predict share one rule).

The workflow's decision of where a fold job runs, made without torch, is
``nnunet_core.workflow.devices``; this module is the job's own choice once torch is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.errors import ConfigurationError

if TYPE_CHECKING:  # torch loads only when a device is resolved (the CLI stays fast)
    import torch


def resolve_device(name: str | None) -> torch.device:
    """``-device``; without it CUDA when available, else the CPU. The GPU comes from
    ``CUDA_VISIBLE_DEVICES``, never from the flag."""
    import torch

    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        msg = "-device cuda but torch sees no CUDA device (use -device cpu)"
        raise ConfigurationError(msg)
    if name == "mps" and not torch.backends.mps.is_available():
        msg = "-device mps but MPS is not available on this machine"
        raise ConfigurationError(msg)
    return torch.device(name)
