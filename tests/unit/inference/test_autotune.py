"""cuDNN autotuning in prediction: on for CUDA as upstream's predictor, never under deterministic
algorithms. CUDA cannot run here: a ``torch.device("cuda")`` object stands in (only its type is
read), and the flag is restored after each test."""

from __future__ import annotations

import pytest
import torch

from nnunet_core.inference.predictor import autotune_convolutions


@pytest.fixture(autouse=True)
def _restore_flags():
    benchmark = torch.backends.cudnn.benchmark
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.backends.cudnn.benchmark = False
    yield
    torch.backends.cudnn.benchmark = benchmark
    torch.use_deterministic_algorithms(deterministic)


def test_cuda_prediction_autotunes() -> None:
    autotune_convolutions(torch.device("cuda"))
    assert torch.backends.cudnn.benchmark is True


def test_a_deterministic_folds_validation_keeps_autotuning_off() -> None:
    torch.use_deterministic_algorithms(True)
    autotune_convolutions(torch.device("cuda"))
    assert torch.backends.cudnn.benchmark is False


def test_the_cpu_leaves_the_flag_alone() -> None:
    autotune_convolutions(torch.device("cpu"))
    assert torch.backends.cudnn.benchmark is False
