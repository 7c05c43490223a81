"""U-Net topology from spacing and patch size: pooling strides, conv kernels, padded patch.

The same rules as upstream's ``get_pool_and_conv_props`` (nnU-Net v1's ``_v2`` variant), so plans
match bit for bit: an axis is pooled while its feature map stays >= 2x the minimum edge length and
its spacing is within a factor 2 of the finest poolable spacing; kernels switch from 1 to 3 once an
axis's spacing is within a factor 2 of the finest spacing. Sizes stay floats on purpose: a patch
clipped to a float median shape (e.g. 45.5) is halved with ``ceil`` exactly as upstream does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_MIN_FEATURE_MAP_SIZE = 4
UNLIMITED_POOLING = 999999


@dataclass(frozen=True)
class Topology:
    """Result of :func:`pool_and_conv_props` (one entry per stage in
    ``strides``/``kernel_sizes``)."""

    num_pool_per_axis: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    kernel_sizes: tuple[tuple[int, ...], ...]
    patch_size: tuple[int, ...]
    divisible_by: tuple[int, ...]

    @property
    def n_stages(self) -> int:
        return len(self.strides)


def pad_shape(shape: Sequence[float], divisible_by: Sequence[int]) -> tuple[int, ...]:
    """Round every axis up to the next multiple (a multiple stays as it is)."""
    padded = []
    for size, step in zip(shape, divisible_by, strict=True):
        value = size + step - size % step
        if size % step == 0:
            value -= step
        padded.append(int(value))
    return tuple(padded)


def pool_and_conv_props(
    spacing: Sequence[float],
    patch_size: Sequence[float],
    min_feature_map_size: int = DEFAULT_MIN_FEATURE_MAP_SIZE,
    max_numpool: int = UNLIMITED_POOLING,
) -> Topology:
    """Strides, kernels and the patch padded to a multiple of ``2**num_pool`` per axis."""
    dim = len(spacing)
    current_spacing = [float(s) for s in spacing]
    current_size = [float(s) for s in patch_size]
    strides: list[tuple[int, ...]] = [(1,) * dim]
    kernels: list[tuple[int, ...]] = []
    num_pool = [0] * dim
    kernel = [1] * dim
    while True:
        valid = [i for i in range(dim) if current_size[i] >= 2 * min_feature_map_size]
        if not valid:
            break
        finest = min(current_spacing[i] for i in valid)
        valid = [i for i in valid if current_spacing[i] / finest < 2]
        valid = [i for i in valid if num_pool[i] < max_numpool]
        if len(valid) == 1 and current_size[valid[0]] < 3 * min_feature_map_size:
            break
        if not valid:
            break
        finest_overall = min(current_spacing)
        for d in range(dim):
            if kernel[d] != 3 and current_spacing[d] / finest_overall < 2:
                kernel[d] = 3
        stride = [1] * dim
        for axis in valid:
            stride[axis] = 2
            num_pool[axis] += 1
            current_spacing[axis] *= 2
            current_size[axis] = math.ceil(current_size[axis] / 2)
        strides.append(tuple(stride))
        kernels.append(tuple(kernel))
    divisible_by = tuple(2**n for n in num_pool)
    kernels.append((3,) * dim)  # the bottleneck always uses 3-kernels
    return Topology(
        num_pool_per_axis=tuple(num_pool),
        strides=tuple(strides),
        kernel_sizes=tuple(kernels),
        patch_size=pad_shape(patch_size, divisible_by),
        divisible_by=divisible_by,
    )
