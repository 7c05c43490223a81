"""Crop to the nonzero region (union over channels, holes filled), as upstream does."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import binary_fill_holes

OUTSIDE_LABEL = -1


def nonzero_mask(data: np.ndarray) -> np.ndarray:
    """Union over channels of ``data != 0`` with holes filled; ``data`` is ``(c, z, y, x)``."""
    mask = np.any(data != 0, axis=0)
    return binary_fill_holes(mask)


def bbox_of(mask: np.ndarray) -> list[list[int]]:
    """``[[lo, hi), ...]`` per axis of the True voxels (the whole array if there are none)."""
    bbox = []
    for axis in range(mask.ndim):
        other = tuple(a for a in range(mask.ndim) if a != axis)
        hits = np.flatnonzero(np.any(mask, axis=other))
        if hits.size == 0:
            return [[0, s] for s in mask.shape]
        bbox.append([int(hits[0]), int(hits[-1]) + 1])
    return bbox


def slicer(bbox: list[list[int]]) -> tuple[slice, ...]:
    return tuple(slice(lo, hi) for lo, hi in bbox)


def crop_to_nonzero(
    data: np.ndarray, seg: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    """Crop ``(c, z, y, x)`` data and ``(1, z, y, x)`` seg to the filled nonzero bbox.

    Inside the bbox, seg voxels that are 0 and outside the mask become -1 ("outside the body").
    Without a seg, one is made: 0 inside the mask, -1 outside (int8).
    """
    mask = nonzero_mask(data)
    bbox = bbox_of(mask)
    spatial = slicer(bbox)
    data = data[(slice(None), *spatial)]
    mask = mask[spatial][None]
    if seg is None:
        seg = np.where(mask, np.int8(0), np.int8(OUTSIDE_LABEL))
    else:
        seg = seg[(slice(None), *spatial)]
        signed = seg.dtype if np.issubdtype(seg.dtype, np.signedinteger) else np.int16
        seg = seg.astype(signed, copy=True)
        seg[(seg == 0) & ~mask] = OUTSIDE_LABEL
    return data, seg, bbox
