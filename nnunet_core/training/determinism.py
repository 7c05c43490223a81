"""Deterministic mode (config ``deterministic: true``, ``nnunet-core train --deterministic``).

Sampling and augmentation are already seeded from (seed, fold, epoch, iteration, sample), so an
interrupted run sees the same batches as an uninterrupted one. This mode also makes torch use
deterministic kernels (an error names any operation that has none), disables cuDNN autotuning,
and sets ``CUBLAS_WORKSPACE_CONFIG`` (needed by deterministic cuBLAS; set before CUDA starts).
It costs speed on GPUs and changes nothing about the results' quality.

Without it a CUDA fold turns cuDNN autotuning on, as upstream's ``run_training`` does: with a
fixed patch size each convolution's fastest algorithm is measured once, in the first iterations.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def configure_kernels(deterministic: bool, seed: int, device: torch.device) -> None:
    """Deterministic mode (``enable_determinism``), else cuDNN autotuning on CUDA; the CPU's
    settings stay as they are (cuDNN is never used there)."""
    import torch

    if deterministic:
        enable_determinism(seed)
    elif device.type == "cuda":
        torch.backends.cudnn.benchmark = True


def enable_determinism(seed: int) -> None:
    """Deterministic algorithms in torch and seeded global generators of random, numpy, torch."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    # torch.use_deterministic_algorithms also sets the compiler's flag, importing all of
    # torch._inductor for it (seconds per training process); only a compiled network needs that
    # flag, and maybe_compile sets it (deterministic_compiler) before compiling.
    torch._C._set_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def is_deterministic() -> bool:
    import torch

    return torch.are_deterministic_algorithms_enabled()


def deterministic_compiler() -> None:
    """Carry deterministic mode into ``torch.compile``'s code generator, when it is on."""
    import torch

    if torch.are_deterministic_algorithms_enabled():
        torch.use_deterministic_algorithms(True)
