"""The label-map resize rule written plainly: the reference the fast paths are checked against."""

from __future__ import annotations

import numpy as np
from skimage.transform import resize


def reference_seg_resize(seg: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """batchgenerators 0.25.5's rule over whole volumes: skimage order-1 scores of every label,
    first argmax, the nearest-neighbour label where it shares the top (non-zero) score."""
    labels = np.unique(seg)
    scores = np.stack(
        [
            resize((seg == c).astype(float), shape, 1, mode="edge", anti_aliasing=False)
            for c in labels
        ]
    )
    nearest = resize(seg.astype(float), shape, 0, mode="edge", anti_aliasing=False)
    out = labels[np.argmax(scores, axis=0)]
    nearest_score = np.take_along_axis(scores, np.searchsorted(labels, nearest)[None], 0)[0]
    tie = (nearest_score == scores.max(0)) & (nearest_score > 0)
    out[tie] = nearest[tie]
    return out
