"""Deep supervision: which resolutions are supervised, how much each counts, and their targets.

The decoder emits one output per decoder stage; output ``i`` has the resolution of encoder stage
``i``, i.e. the patch divided by the cumulative strides of stages ``0..i``. The bottleneck has no
output, hence the dropped last scale.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from nnunet_core.errors import ConfigurationError


def deep_supervision_scales(strides: Sequence[Sequence[int]]) -> list[list[float]]:
    """Per output (highest resolution first) the size factor relative to the patch."""
    if len(strides) < 2:
        msg = f"deep supervision needs at least 2 stages, got strides={list(strides)}"
        raise ConfigurationError(msg)
    cumulative = np.cumprod(np.vstack([np.asarray(s, dtype=float) for s in strides]), axis=0)
    return [[float(v) for v in row] for row in (1.0 / cumulative)[:-1]]


def deep_supervision_weights(n_outputs: int, last_weight: float = 0.0) -> list[float]:
    """Weights ``1/2**i``, the lowest resolution set to ``last_weight``, normalised to sum 1.

    ``last_weight`` 0 drops the coarsest output, as upstream does; a tiny positive value keeps its
    head in the graph (distributed training needs every parameter to get a gradient).
    """
    if n_outputs < 1:
        msg = f"deep supervision needs at least one output, got n_outputs={n_outputs}"
        raise ConfigurationError(msg)
    if n_outputs == 1:
        return [1.0]
    weights = np.array([1.0 / 2**i for i in range(n_outputs)])
    weights[-1] = last_weight
    return [float(w) for w in weights / weights.sum()]


def downsample_targets(seg: torch.Tensor, scales: Sequence[Sequence[float]]) -> list[torch.Tensor]:
    """Nearest-neighbour copies of ``seg`` at every scale (labels are never interpolated).

    ``seg`` is ``(B, C, *spatial)`` or ``(C, *spatial)``; each output keeps the layout and dtype.
    A scale of all ones returns ``seg`` itself. Upstream interpolates with "nearest-exact", which
    reads voxel ``floor((i + 0.5) * f)`` = ``i * f + f // 2``; where every axis shrinks by a whole
    factor ``f`` that is a strided slice, taken as is (the float copy and the interpolation of a
    real-size batch cost tens of ms per batch).
    """
    ndim = len(scales[0]) if scales else 0
    if seg.ndim not in (ndim + 1, ndim + 2):
        msg = f"seg of shape {tuple(seg.shape)} does not fit {ndim}D scales {list(scales)}"
        raise ConfigurationError(msg)
    batched = seg if seg.ndim == ndim + 2 else seg[None]
    spatial = batched.shape[2:]
    outputs = []
    for scale in scales:
        if all(s == 1 for s in scale):
            outputs.append(seg)
            continue
        size = [round(n * s) for n, s in zip(spatial, scale, strict=True)]
        if all(m > 0 and n % m == 0 for n, m in zip(spatial, size, strict=True)):
            steps = [n // m for n, m in zip(spatial, size, strict=True)]
            box = (slice(None), slice(None), *(slice(f // 2, None, f) for f in steps))
            small = batched[box].contiguous()
        else:
            small = F.interpolate(batched.float(), size=size, mode="nearest-exact").to(seg.dtype)
        outputs.append(small if seg.ndim == ndim + 2 else small[0])
    return outputs
