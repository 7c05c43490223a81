"""``torch.optim.SGD`` without the import of ``torch._dynamo`` that its methods make.

torch's optimizers wrap ``step``, ``zero_grad``, ``add_param_group``, ``state_dict`` and
``load_state_dict`` so that a compiler tracing them skips or breaks the graph there; the wrappers
import ``torch._dynamo`` on their first call, about 1.7 s of CPU in every fold job (a tiny fold's
whole training is a few seconds) and in every rank. Our optimizer steps eagerly, outside any
compiled region (``torch.compile`` wraps the network only), so nothing traces these methods and
the wrappers have nothing to do: ``EagerSGD`` calls the methods they wrap. The arithmetic is
torch's own (``SGD.step`` and its functional ``sgd``: the same kernels, foreach on CUDA), the
state dict the same (upstream's checkpoints load into it), and a torch without the wrappers
(no ``__wrapped__``) is called as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.optim import SGD, Optimizer


def _unwrapped(method: Callable) -> Callable:
    """The function a torch decorator wrapped (``functools.wraps`` keeps it), else ``method``."""
    return getattr(method, "__wrapped__", method)


_STEP = _unwrapped(SGD.step)
_ZERO_GRAD = _unwrapped(Optimizer.zero_grad)
_ADD_PARAM_GROUP = _unwrapped(Optimizer.add_param_group)
_STATE_DICT = _unwrapped(Optimizer.state_dict)
_LOAD_STATE_DICT = _unwrapped(Optimizer.load_state_dict)


class EagerSGD(SGD):
    """SGD as torch computes it, called without its compiler wrappers (see the module)."""

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        # what the step's wrapper does besides the compiler's graph break: no autograd graph
        # of the update (torch's optimizers are not differentiable unless asked)
        with torch.set_grad_enabled(bool(self.defaults.get("differentiable", False))):
            return _STEP(self, closure)

    def zero_grad(self, set_to_none: bool = True) -> None:
        _ZERO_GRAD(self, set_to_none)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        _ADD_PARAM_GROUP(self, param_group)

    def state_dict(self) -> dict[str, Any]:
        return _STATE_DICT(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _LOAD_STATE_DICT(self, state_dict)
