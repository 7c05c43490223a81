"""Random mirroring: each allowed axis flipped with p=0.5 (upstream MirrorTransform, always on)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def draw_mirror_axes(allowed_axes: Sequence[int], rng: np.random.Generator) -> tuple[int, ...]:
    """Spatial axes to flip: each allowed one independently with p=0.5."""
    return tuple(a for a in allowed_axes if rng.random() < 0.5)


def mirror(data: np.ndarray, seg: np.ndarray, axes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Flip data and seg (both (c, *spatial)) along spatial ``axes``; returns views, no copy."""
    if not axes:
        return data, seg
    dims = tuple(a + 1 for a in axes)
    return np.flip(data, dims), np.flip(seg, dims)
