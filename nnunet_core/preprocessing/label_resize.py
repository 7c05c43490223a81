"""The order-1 label-map resize computed only where labels meet, to the last bit.

Upstream resizes one float64 indicator per label over the whole output (batchgenerators'
``resize_segmentation``), although an output voxel whose interpolation window (the 2 input
voxels per axis that order 1 reads) holds a single label gets that label whatever the rounding:
its own score is a sum of weights (>= 0.5), every other score is exactly 0. So only "mixed"
voxels, near label boundaries, need scores. They are evaluated with ``map_coordinates`` at the
very coordinates ``scipy.ndimage.zoom(grid_mode=True)`` uses, ``(k + 0.5) * (in / out) - 0.5``,
which gives zoom's values bit for bit (tests/unit/preprocessing/test_label_resize.py). On real
label maps (organs, lesions) a few percent of voxels are mixed; where most are (noise-like maps)
the caller falls back to whole indicators.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from scipy.ndimage import map_coordinates

# above this share of mixed output voxels, whole-volume zooms are cheaper than point-wise scores
MAX_MIXED_FRACTION = 0.25


def grid_coordinates(in_size: int, out_size: int) -> np.ndarray:
    """Input coordinate of every output index along one axis, as zoom's grid mode computes it."""
    factor = np.float64(in_size) / np.float64(out_size)
    return (np.arange(out_size, dtype=np.float64) + 0.5) * factor - 0.5


def window_extremes(
    seg: np.ndarray, coordinates: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest label in each output voxel's order-1 window (edges clamped, as
    mode 'nearest' does), reduced one axis at a time."""
    low = high = seg
    for axis, (coords, size) in enumerate(zip(coordinates, seg.shape, strict=True)):
        first = np.clip(np.floor(coords).astype(np.intp), 0, size - 1)
        second = np.minimum(first + 1, size - 1)
        low = np.minimum(np.take(low, first, axis), np.take(low, second, axis))
        high = np.maximum(np.take(high, first, axis), np.take(high, second, axis))
    return low, high


def pick_labels(
    scores: Iterable[np.ndarray], labels: np.ndarray, nearest: np.ndarray
) -> np.ndarray:
    """batchgenerators' rule: the label with the highest score, the smallest among equals,
    except that the nearest-neighbour label wins wherever it shares the top (non-zero) score."""
    best = winner = nearest_score = None
    for index, score in enumerate(scores):
        is_nearest = nearest == labels[index]
        if best is None:
            best, winner = score, np.zeros(score.shape, dtype=np.int32)
            nearest_score = np.where(is_nearest, score, 0.0)
            continue
        np.copyto(nearest_score, score, where=is_nearest)
        winner[score > best] = index
        np.maximum(best, score, out=best)
    result = labels[winner]
    keep_nearest = (nearest_score == best) & (nearest_score > 0)
    result[keep_nearest] = nearest[keep_nearest]
    return result


def resize_mixed_only(
    seg: np.ndarray, shape: Sequence[int], labels: np.ndarray, nearest: np.ndarray
) -> np.ndarray | None:
    """The order-1 label resize of ``seg`` (``labels``: its sorted distinct values, at least
    two; ``nearest``: its order-0 resize), or None when too many voxels are mixed to gain."""
    coordinates = [grid_coordinates(i, o) for i, o in zip(seg.shape, shape, strict=True)]
    result, high = window_extremes(seg, coordinates)
    points = np.nonzero(result != high)
    del high
    if points[0].size > MAX_MIXED_FRACTION * result.size:
        return None
    if points[0].size == 0:
        return result
    where = np.stack([c[p] for c, p in zip(coordinates, points, strict=True)])

    def scores() -> Iterable[np.ndarray]:
        for label in labels:
            indicator = (seg == label).view(np.uint8)
            score = map_coordinates(indicator, where, output=np.float64, order=1, mode="nearest")
            # zoom_resize clips to the indicator's range, which is [0, 1] with two labels or more
            yield np.clip(score, 0.0, 1.0, out=score)

    result[points] = pick_labels(scores(), labels, nearest[points])
    return result
