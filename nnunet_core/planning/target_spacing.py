"""Full-resolution target spacing, axis transpose and resampled shapes (upstream's rules).

Numpy's percentile/median are used on purpose: the planner's float values (e.g. the median of two
float32 spacings) must come out bit-identical to upstream's plans.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ANISOTROPY_THRESHOLD = 3.0


def fullres_target_spacing(
    spacings: Sequence[Sequence[float]],
    shapes_after_crop: Sequence[Sequence[int]],
    anisotropy_threshold: float = ANISOTROPY_THRESHOLD,
) -> np.ndarray:
    """Per-axis median spacing, except for strongly anisotropic data.

    When the coarsest axis is > threshold x the others *and* has < 1/threshold of their voxels,
    its target becomes the 10th percentile of its spacings (never finer than the other axes), so
    that the few slices are not thinned out further by resampling.
    """
    all_spacings = np.vstack(spacings)
    target = np.percentile(all_spacings, 50, 0)
    target_size = np.percentile(np.asarray(shapes_after_crop), 50, 0)
    worst = int(np.argmax(target))
    others = [i for i in range(len(target)) if i != worst]
    other_spacings = [target[i] for i in others]
    other_sizes = [target_size[i] for i in others]
    aniso_spacing = target[worst] > anisotropy_threshold * max(other_spacings)
    aniso_voxels = target_size[worst] * anisotropy_threshold < min(other_sizes)
    if aniso_spacing and aniso_voxels:
        value = np.percentile(all_spacings[:, worst], 10)
        if value < max(other_spacings):
            value = max(max(other_spacings), value) + 1e-5
        target[worst] = value
    return target


def transpose_axes(target_spacing: Sequence[float]) -> tuple[list[int], list[int]]:
    """``(forward, backward)``: the coarsest axis first, so 2D works on the two finest axes."""
    coarsest = int(np.argmax(target_spacing))
    forward = [coarsest] + [i for i in range(len(target_spacing)) if i != coarsest]
    backward = [forward.index(i) for i in range(len(target_spacing))]
    return forward, backward


def compute_new_shape(
    old_shape: Sequence[int], old_spacing: Sequence[float], new_spacing: Sequence[float]
) -> np.ndarray:
    """Shape after resampling: ``round(old_spacing / new_spacing * old_shape)`` per axis."""
    return np.array(
        [int(round(s / t * n)) for s, t, n in zip(old_spacing, new_spacing, old_shape, strict=True)]
    )
