"""Deterministic mode: torch's deterministic kernels, no cuDNN autotuning, cuBLAS's workspace;
without it, cuDNN autotuning on CUDA."""

from __future__ import annotations

import os

import pytest
import torch

from nnunet_core.training.determinism import (
    configure_kernels,
    enable_determinism,
    is_deterministic,
)

CUBLAS = "CUBLAS_WORKSPACE_CONFIG"


def test_deterministic_mode_and_nothing_left_behind() -> None:
    before_env = os.environ.pop(CUBLAS, None)
    before_cudnn = torch.backends.cudnn.deterministic
    try:
        enable_determinism(3)
        assert is_deterministic() and not torch.backends.cudnn.benchmark
        assert os.environ[CUBLAS] == ":4096:8"
    finally:  # the rest of the session must not run in deterministic mode
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = before_cudnn
        os.environ.pop(CUBLAS, None)
        if before_env is not None:
            os.environ[CUBLAS] = before_env


def test_a_compiled_network_gets_the_compilers_deterministic_flag_too() -> None:
    """enable_determinism leaves torch._inductor unimported (seconds per training process);
    maybe_compile's deterministic_compiler sets its flag where a network is compiled."""
    import torch._inductor.config as inductor_config

    from nnunet_core.training.determinism import deterministic_compiler

    inductor_config.deterministic = False
    before_cudnn = torch.backends.cudnn.deterministic
    try:
        deterministic_compiler()  # deterministic mode off: the flag stays off
        assert inductor_config.deterministic is False
        enable_determinism(3)
        deterministic_compiler()
        assert inductor_config.deterministic is True
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = before_cudnn
        os.environ.pop(CUBLAS, None)


@pytest.mark.parametrize(
    ("deterministic", "device", "benchmark"),
    [(False, "cuda", True), (True, "cuda", False), (False, "cpu", False)],
)
def test_cudnn_autotuning_as_upstream_unless_deterministic(
    deterministic: bool, device: str, benchmark: bool
) -> None:
    """Upstream's run_training turns cuDNN autotuning on for CUDA runs; ours does unless the fold
    is deterministic, and leaves a CPU fold's flag alone. CUDA is faked: a ``cuda`` device
    object needs no GPU, and the flag is a plain setting on a CPU build."""
    before = (torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic)
    before_env = os.environ.get(CUBLAS)
    torch.backends.cudnn.benchmark = False
    try:
        configure_kernels(deterministic, 3, torch.device(device))
        assert torch.backends.cudnn.benchmark is benchmark
        assert is_deterministic() is deterministic
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = before
        if before_env is None:
            os.environ.pop(CUBLAS, None)
