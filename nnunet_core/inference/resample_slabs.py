"""Probability resampling in slabs, with torch: export without every class at full size.

Upstream's probability resampling (``resample_data_or_seg_to_shape``, order 1 and order_z 0 or 1)
is a tensor product of one-dimensional rules, one per axis: linear interpolation at
``(i + 0.5) * n_in / n_out - 0.5`` clamped to the edge (scikit-image's ``resize`` with mode
'edge'), or, along the separate (low-resolution) axis with order 0, picking whole slices. A
tensor product can be computed axis by axis in any order and for any block of output rows, so
the output is produced here slab by slab along its first axis: a slab of C classes and a few
rows is all that is ever held at the target size. Arithmetic is float32 (upstream: float64);
the difference is rounding (about 1e-7 relative), which moves an argmax only at exact ties.
float16 logits (upstream's sliding window: ``--fp16_accumulation``, upstream's own logits) take
the reference path too: they are rounded to float16 after resampling, and any other arithmetic
rounds a few values to the neighbouring float16 step (about 1e-3 in probability).

Other orders (a plans file asking for order 3, or order_z 3) take the reference path
(``preprocessing.resampling.resample``) on the whole array and are then cut into slabs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from nnunet_core.preprocessing.resampling import ResamplePlan, _picked_slices, resample

# float32 values per slab at the target size (16 MB): large enough for torch's threads to pay
# off, small beside a real-size case (its intermediates are a few times this)
SLAB_VALUES = 2**22
LINEAR, PICK, SAME = "linear", "pick", "same"


@dataclass(frozen=True)
class AxisRule:
    """How one output axis reads its input axis: ``SAME``, ``LINEAR`` or ``PICK``."""

    kind: str
    size_in: int
    size_out: int

    def sources(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(lower index, upper index, weight of upper) of output rows ``start:stop``."""
        rows = np.arange(start, stop)
        if self.kind == PICK:
            picked = torch.from_numpy(_picked_slices(self.size_in, self.size_out)[rows])
            return picked, picked, torch.zeros(len(rows))
        coordinates = (rows + 0.5) * (float(self.size_in) / self.size_out) - 0.5
        coordinates = np.clip(coordinates, 0, self.size_in - 1)
        lower = np.floor(coordinates).astype(np.int64)
        upper = np.minimum(lower + 1, self.size_in - 1)
        weight = (coordinates - lower).astype(np.float32)
        return torch.from_numpy(lower), torch.from_numpy(upper), torch.from_numpy(weight)


def axis_rules(
    shape_in: Sequence[int], plan: ResamplePlan, order: int, order_z: int
) -> list[AxisRule] | None:
    """The per-axis rules of a resampling, or None where they are not a tensor product of
    linear and pick rules (then the reference path runs)."""
    rules = []
    for axis, (size_in, size_out) in enumerate(zip(shape_in, plan.new_shape, strict=True)):
        axis_order = order_z if axis == plan.separate_axis else order
        if size_in == size_out:
            rules.append(AxisRule(SAME, size_in, size_out))
        elif axis_order == 1:
            rules.append(AxisRule(LINEAR, size_in, size_out))
        elif axis_order == 0 and axis == plan.separate_axis:
            rules.append(AxisRule(PICK, size_in, size_out))
        else:
            return None
    return rules


def _along(
    x: torch.Tensor, dim: int, rule: AxisRule, start: int, stop: int, dtype: torch.dtype
) -> torch.Tensor:
    """``x`` resampled along ``dim`` (output rows ``start:stop``), in ``dtype``."""
    if rule.kind == SAME:
        return x.narrow(dim, start, stop - start).to(dtype)
    lower, upper, weight = rule.sources(start, stop)
    low = x.index_select(dim, lower).to(dtype)
    if rule.kind == PICK:
        return low
    shape = [1] * x.dim()
    shape[dim] = len(weight)
    weight = weight.view(shape).to(dtype)
    high = x.index_select(dim, upper).to(dtype)
    return low.mul_(1 - weight).add_(high.mul_(weight))


def _in_plane(x: torch.Tensor, rules: Sequence[AxisRule], dtype: torch.dtype) -> torch.Tensor:
    """Axes 2 and 3 of ``(C, rows, a, b)``: torch's bilinear kernel when both are linear."""
    if rules[1].kind == LINEAR and rules[2].kind == LINEAR:
        size = (rules[1].size_out, rules[2].size_out)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    for dim, rule in ((2, rules[1]), (3, rules[2])):
        x = _along(x, dim, rule, 0, rule.size_out, dtype)
    return x


def rounded_to_float16(slab: torch.Tensor) -> torch.Tensor:
    """float32 values of ``slab`` stored as float16 first, rounded once from its float64 as
    numpy (upstream) rounds: torch's float64 -> float16 goes through float32 (rounded twice)."""
    return torch.from_numpy(slab.numpy().astype(np.float16).astype(np.float32))


def _as_tensor(array: torch.Tensor | np.ndarray) -> torch.Tensor:
    if isinstance(array, torch.Tensor):
        return array.detach().cpu()
    if array.dtype not in (np.float16, np.float32, np.float64):
        array = array.astype(np.float32)
    return torch.from_numpy(array)


def resampled_slabs(
    logits: torch.Tensor | np.ndarray,
    plan: ResamplePlan,
    order: int,
    order_z: int,
    axes: Sequence[int] = (0, 1, 2),
    slab_values: int | None = None,
) -> Iterator[tuple[int, torch.Tensor]]:
    """``(first row, slab)`` of ``logits`` ``(C, *spatial)`` resampled to ``plan.new_shape``:
    slabs ``(C, rows, ...)``, float32 (float64 for float16 logits), in the spatial order ``axes``
    (a permutation of the input's axes), along the first of them. float16 input stays float16
    until it is resampled."""
    permuted_plan = ResamplePlan(
        tuple(plan.new_shape[a] for a in axes),
        None if plan.separate_axis is None else list(axes).index(plan.separate_axis),
    )
    source = _as_tensor(logits)
    # float16 logits (upstream's sliding window) are resampled in float64 as upstream does, so
    # that rounding the result to float16 gives upstream's values; the rest in float32
    dtype = torch.float64 if source.dtype == torch.float16 else torch.float32
    rules = axis_rules(source.shape[1:], plan, order, order_z)
    if source.dtype == torch.float16:
        rules = None  # upstream's float16 numbers exactly (see the module's docstring)
    if rules is None:  # the reference path, then cut
        array = source.numpy()
        reference = resample(array.astype(np.float64) if array.dtype == np.float16 else array,
                             plan, False, order, order_z)  # fmt: skip
        source, rules = _as_tensor(reference), [AxisRule(SAME, n, n) for n in plan.new_shape]
    source = source.permute(0, *(a + 1 for a in axes))
    rules = [rules[a] for a in axes]
    rows = permuted_plan.new_shape[0]
    per_row = source.shape[0] * int(np.prod(permuted_plan.new_shape[1:]))
    step = max(1, min(rows, (slab_values or SLAB_VALUES) // max(1, per_row)))
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        yield start, _in_plane(_along(source, 1, rules[0], start, stop, dtype), rules, dtype)
