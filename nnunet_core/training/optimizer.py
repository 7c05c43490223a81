"""Optimisation: SGD with Nesterov momentum, the poly learning rate, clipping, AMP and compile.

Upstream's recipe: ``SGD(lr=1e-2, momentum=0.99, nesterov=True, weight_decay=3e-5)``, the learning
rate ``initial * (1 - epoch / num_epochs) ** 0.9`` set at the start of every epoch (stateless, so a
resumed run gets the same rate without a scheduler state), gradients clipped to norm 12, mixed
precision with a grad scaler only on CUDA, ``torch.compile`` only where it is known to work.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.model.upstream_names import upstream_parameter_order
from nnunet_core.training.eager_sgd import EagerSGD

COMPILE_ENV = "nnUNet_compile"


@dataclass(frozen=True)
class OptimizerSettings:
    """Upstream's defaults; every field can be changed for experiments."""

    initial_lr: float = 1e-2
    momentum: float = 0.99
    nesterov: bool = True
    weight_decay: float = 3e-5
    poly_exponent: float = 0.9
    grad_clip: float = 12.0


def build_optimizer(network: nn.Module, settings: OptimizerSettings) -> torch.optim.SGD:
    """SGD over every trainable parameter (in upstream's order: an optimizer state is exchanged
    with upstream's checkpoints), at the initial learning rate; torch's SGD, called without its
    compiler wrappers (``EagerSGD``: a second and a half less start-up per fold job)."""
    if settings.initial_lr <= 0:
        msg = f"initial learning rate must be > 0, got {settings.initial_lr}"
        raise ConfigurationError(msg)
    return EagerSGD(
        [p for p in upstream_parameter_order(network) if p.requires_grad],
        lr=settings.initial_lr,
        momentum=settings.momentum,
        nesterov=settings.nesterov,
        weight_decay=settings.weight_decay,
    )


def poly_lr(initial_lr: float, epoch: int, num_epochs: int, exponent: float = 0.9) -> float:
    """``initial * (1 - epoch / num_epochs) ** exponent`` (0 at and after the last epoch)."""
    if num_epochs < 1:
        msg = f"num_epochs must be >= 1, got {num_epochs}"
        raise ConfigurationError(msg)
    remaining = max(0.0, 1.0 - epoch / num_epochs)
    return initial_lr * remaining**exponent


def set_epoch_lr(
    optimizer: torch.optim.Optimizer, epoch: int, num_epochs: int, settings: OptimizerSettings
) -> float:
    """Set the poly learning rate of ``epoch`` on every parameter group; returns it."""
    lr = poly_lr(settings.initial_lr, epoch, num_epochs, settings.poly_exponent)
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr


def build_grad_scaler(device: torch.device) -> torch.amp.GradScaler | None:
    """A grad scaler for float16 autocast on CUDA; none elsewhere (CPU/MPS train in float32)."""
    return torch.amp.GradScaler("cuda") if device.type == "cuda" else None


def autocast(device: torch.device) -> AbstractContextManager:
    """Mixed precision on CUDA only, as upstream (CPU autocast is bfloat16 and slow here)."""
    return torch.autocast("cuda") if device.type == "cuda" else nullcontext()


def should_compile(device: torch.device, requested: bool | None = None) -> bool:
    """Whether to ``torch.compile``: never on CPU, MPS or Windows; else the request.

    ``requested=None`` reads ``nnUNet_compile`` (true/1/t; unset means yes on CUDA, as upstream).
    """
    if device.type != "cuda" or os.name == "nt":
        return False
    if requested is not None:
        return requested
    value = os.environ.get(COMPILE_ENV)
    if value is None:
        return True
    return value.strip().lower() in ("1", "true", "t", "yes", "y")


def maybe_compile(network: nn.Module, device: torch.device, requested: bool | None) -> nn.Module:
    """The compiled network where ``should_compile`` says so, else ``network`` itself."""
    if should_compile(device, requested):
        from nnunet_core.training.determinism import deterministic_compiler

        deterministic_compiler()
        return torch.compile(network)
    return network


def unwrap(network: nn.Module) -> nn.Module:
    """The plain module under a compiled and/or DDP wrapper (what checkpoints store)."""
    while True:
        if hasattr(network, "_orig_mod"):
            network = network._orig_mod
        elif isinstance(network, nn.parallel.DistributedDataParallel):
            network = network.module
        else:
            return network


def optimizer_step(
    loss: torch.Tensor,
    network: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    grad_clip: float,
) -> None:
    """Backward, clip the gradient norm to ``grad_clip`` (after unscaling), step, zero grads."""
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
