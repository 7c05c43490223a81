"""Optimisation recipe: upstream's SGD settings, poly LR, clipping at 12, AMP/compile only on
CUDA."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.optimizer import (
    OptimizerSettings,
    autocast,
    build_grad_scaler,
    build_optimizer,
    optimizer_step,
    poly_lr,
    set_epoch_lr,
    should_compile,
    unwrap,
)


def test_sgd_has_upstreams_hyperparameters() -> None:
    optimizer = build_optimizer(nn.Linear(3, 2), OptimizerSettings())
    group = optimizer.param_groups[0]
    assert isinstance(optimizer, torch.optim.SGD)
    assert (group["lr"], group["momentum"], group["nesterov"], group["weight_decay"]) == (
        1e-2,
        0.99,
        True,
        3e-5,
    )
    assert len(group["params"]) == 2


def test_frozen_parameters_are_not_optimised() -> None:
    net = nn.Linear(3, 2)
    net.bias.requires_grad_(False)
    assert len(build_optimizer(net, OptimizerSettings()).param_groups[0]["params"]) == 1


def test_poly_lr_follows_the_formula() -> None:
    assert poly_lr(1e-2, 0, 1000) == 1e-2
    assert poly_lr(1e-2, 500, 1000) == pytest.approx(1e-2 * 0.5**0.9)
    assert poly_lr(1e-2, 999, 1000) == pytest.approx(1e-2 * 0.001**0.9)
    assert poly_lr(1e-2, 1000, 1000) == 0.0
    assert poly_lr(1e-2, 1200, 1000) == 0.0  # never negative or complex past the end
    with pytest.raises(ConfigurationError, match="num_epochs"):
        poly_lr(1e-2, 0, 0)


def test_set_epoch_lr_is_stateless_and_sets_every_group() -> None:
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    optimizer = torch.optim.SGD([{"params": a.parameters()}, {"params": b.parameters()}], lr=1.0)
    settings = OptimizerSettings()
    lr = set_epoch_lr(optimizer, 7, 10, settings)
    assert lr == pytest.approx(1e-2 * 0.3**0.9)
    assert [g["lr"] for g in optimizer.param_groups] == [lr, lr]
    # a resumed run that jumps straight to epoch 7 gets the same rate
    assert set_epoch_lr(optimizer, 7, 10, settings) == lr


def test_gradients_are_clipped_to_norm_12() -> None:
    weight = nn.Parameter(torch.zeros(4))
    net = nn.Module()
    net.weight = weight
    optimizer = torch.optim.SGD([weight], lr=1.0)
    loss = (1000.0 * weight).sum()  # gradient norm 2000
    optimizer_step(loss, net, optimizer, None, grad_clip=12.0)
    assert weight.detach().norm().item() == pytest.approx(12.0, rel=1e-5)
    assert weight.grad is None  # zeroed (set to None) after the step


def test_small_gradients_are_not_changed_by_clipping() -> None:
    weight = nn.Parameter(torch.zeros(4))
    net = nn.Module()
    net.weight = weight
    optimizer = torch.optim.SGD([weight], lr=1.0)
    optimizer_step((0.5 * weight).sum(), net, optimizer, None, grad_clip=12.0)
    assert torch.allclose(weight.detach(), torch.full((4,), -0.5))


def test_amp_and_scaler_only_on_cuda() -> None:
    cpu = torch.device("cpu")
    assert build_grad_scaler(cpu) is None
    assert build_grad_scaler(torch.device("mps")) is None
    with autocast(cpu):
        assert not torch.is_autocast_enabled()


def test_compile_is_never_used_on_cpu_or_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("nnUNet_compile", "true")
    assert should_compile(torch.device("cpu"), True) is False
    assert should_compile(torch.device("mps"), None) is False


@pytest.mark.parametrize(
    ("env", "expected"), [(None, True), ("f", False), ("0", False), ("true", True), ("T", True)]
)
def test_compile_on_cuda_follows_nnunet_compile(
    monkeypatch: pytest.MonkeyPatch, env: str | None, expected: bool
) -> None:
    if env is None:
        monkeypatch.delenv("nnUNet_compile", raising=False)
    else:
        monkeypatch.setenv("nnUNet_compile", env)
    assert should_compile(torch.device("cuda"), None) is expected
    assert should_compile(torch.device("cuda"), False) is False


def test_unwrap_returns_the_module_under_a_compile_wrapper() -> None:
    inner = nn.Linear(2, 2)
    wrapper = nn.Module()
    wrapper._orig_mod = inner
    assert unwrap(wrapper) is inner
    assert unwrap(inner) is inner


def test_a_training_step_lowers_a_simple_loss() -> None:
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    optimizer = build_optimizer(net, OptimizerSettings())
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    first = nn.functional.mse_loss(net(x), y).item()
    for _ in range(20):
        optimizer_step(nn.functional.mse_loss(net(x), y), net, optimizer, None, 12.0)
    assert nn.functional.mse_loss(net(x), y).item() < first
    assert not math.isnan(first)
