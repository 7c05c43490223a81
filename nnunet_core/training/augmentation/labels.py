"""Labels through the spatial transform: every label's indicator sampled with the image, the top
score wins, the nearest input label settles ties; outside the input counts as the padding label.

One label per seg channel needs no indicator (its score is the rest of the weight) and the weight
falling outside the input is computed, not sampled, so a binary segmentation costs one extra
channel. Scores closer than TIE_TOLERANCE count as tied: upstream keeps scores as float16 at
scale 1000, which cannot tell apart differences below ~2.5e-4 near the 0.5 threshold.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nnunet_core.training.augmentation.interpolation import (
    GridSampler,
    ScalingSampler,
    TiledSampler,
)

Sampler = GridSampler | ScalingSampler | TiledSampler

PAD_SEG = -1  # upstream padding_value_seg=-1 (border_mode_seg='constant')
TIE_TOLERANCE = 2.5e-4


def resample(data: np.ndarray, seg: np.ndarray, sampler: Sampler) -> tuple[np.ndarray, np.ndarray]:
    """Sample image channels and label indicators together; argmax the label scores."""
    groups = seg.shape[1]
    plans = [_label_plan(channel) for channel in seg]
    n_data = data.shape[0]
    parts = [data]
    for channel, (_, explicit) in zip(seg, plans, strict=True):
        parts.extend(channel == label for label in explicit)  # (groups, *plane) each
    sampled = sampler.sample(parts)
    inside = sampler.inside_weight() if sampler.reaches_outside else None
    out_shape = sampler.out_shape
    out_seg = np.empty((seg.shape[0], groups, *out_shape), dtype=seg.dtype)
    i = n_data
    for k, (implicit, explicit) in enumerate(plans):
        n = len(explicit) * groups
        # explicit point count: a single-valued seg has no explicit labels (size-0 scores)
        scores = sampled[i : i + n].reshape(len(explicit), groups, int(np.prod(out_shape)))
        i += n
        labels = _argmax_labels(
            scores, implicit, explicit, inside, lambda idx, k=k: _nearest(seg[k], sampler, idx)
        )
        out_seg[k] = labels.reshape(groups, *out_shape)
    return sampled[:n_data], out_seg.reshape(-1, *out_shape)


def _label_plan(channel: np.ndarray) -> tuple[int | None, list[int]]:
    """(implicit label, labels to sample) for one seg channel.

    The sampled indicators of all labels sum to the weight inside the input, so the smallest
    non-padding label needs no channel of its own: its score is that weight minus the others'.
    """
    labels = _present_labels(channel)
    real = [lab for lab in labels if lab != PAD_SEG]
    if not real:
        return None, []
    return real[0], [lab for lab in labels if lab != real[0]]


def _present_labels(seg: np.ndarray) -> list[int]:
    """Sorted label values; a min/max scan plus one compare per value when the range is small."""
    lo, hi = int(seg.min()), int(seg.max())
    if hi - lo > 32:
        return [int(v) for v in np.unique(seg)]
    return [v for v in range(lo, hi + 1) if v in (lo, hi) or (seg == v).any()]


def _argmax_labels(
    scores: np.ndarray,
    implicit: int | None,
    explicit: list[int],
    inside: np.ndarray | None,
    nearest: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Per-point label with the top score; ties (within TIE_TOLERANCE) go to the nearest label.

    ``scores`` (len(explicit), groups, points); ``inside`` the in-input weight per point (None:
    all 1). The padding label scores the outside weight plus its own indicator. Points fully
    inside are settled without the padding label; only border points (inside < 1) need it.
    """
    groups, per_group = scores.shape[1:]
    if implicit is None:
        return np.full(groups * per_group, PAD_SEG)
    result = _argmax_inside(scores, implicit, explicit, nearest)
    if inside is None:
        return result
    border = np.flatnonzero(inside.reshape(-1) < 1)
    if border.size:
        idx = (np.arange(groups)[:, None] * per_group + border).reshape(-1)
        # explicit row count, not -1: a single-label seg has no explicit rows (size 0)
        sub = scores.reshape(len(explicit), groups * per_group)[:, idx][:, None]
        weight = np.tile(inside.reshape(-1)[border], groups)
        result[idx] = _argmax_general(sub, implicit, explicit, weight, lambda t: nearest(idx[t]))
    return result


def _argmax_inside(
    scores: np.ndarray, implicit: int, explicit: list[int], nearest: Callable
) -> np.ndarray:
    """Labels where all weight is inside the input; two labels need one comparison."""
    n_points = scores.shape[1] * scores.shape[2]
    if not explicit:
        return np.full(n_points, implicit)
    if len(explicit) > 1:
        return _argmax_general(scores, implicit, explicit, None, nearest)
    margin = 2 * scores[0].reshape(-1) - 1  # explicit score minus the implicit one
    result = np.where(margin > 0, explicit[0], implicit)
    tied = np.flatnonzero(np.abs(margin) <= TIE_TOLERANCE)
    if tied.size:
        result[tied] = nearest(tied)  # with two labels the nearest one is always tied
    return result


def _argmax_general(
    scores: np.ndarray,
    implicit: int,
    explicit: list[int],
    inside: np.ndarray | None,
    nearest: Callable,
) -> np.ndarray:
    """Labels from all candidates, PAD_SEG scoring the outside weight (``inside`` broadcasts over
    groups; None: all inside, so PAD_SEG only competes where it is a label of the input)."""
    weight = np.float32(1) if inside is None else inside
    rows = dict(zip(explicit, scores, strict=True))  # label -> (groups, points) score view
    rows[implicit] = weight - scores.sum(0)
    if inside is not None:
        outside = 1 - inside
        pad_alone = np.broadcast_to(outside, scores.shape[1:])
        rows[PAD_SEG] = rows[PAD_SEG] + outside if PAD_SEG in rows else pad_alone
    labels = sorted(rows)
    ordered = [rows[label].reshape(-1) for label in labels]
    top, winner = _row_argmax(ordered)
    result = np.asarray(labels)[winner]
    # scores sum to 1, so two can be within the tolerance of the top only where top <= ~0.5
    maybe = np.flatnonzero(top <= np.float32(0.5 + TIE_TOLERANCE))
    if maybe.size:
        near_top = top[maybe] - np.float32(TIE_TOLERANCE)
        candidates = np.stack([values[maybe] for values in ordered])
        tied_rows = (candidates >= near_top).sum(0) > 1
        tied = maybe[tied_rows]
        if tied.size:
            near = nearest(tied)
            own = candidates[:, tied_rows][np.searchsorted(labels, near), np.arange(tied.size)]
            use = own >= near_top[tied_rows]
            result[tied[use]] = near[use]
    return result


def _row_argmax(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(max, first argmax) over equal-length score arrays, in contiguous passes."""
    top = np.array(rows[0], dtype=np.float32)
    winner = np.zeros(top.shape, dtype=np.int16)
    for r, values in enumerate(rows[1:], start=1):
        np.copyto(winner, r, where=values > top)
        np.maximum(top, values, out=top)
    return top, winner


def _nearest(seg: np.ndarray, sampler: Sampler, idx: np.ndarray) -> np.ndarray:
    """Nearest-neighbour labels of ``seg`` (groups, *plane) at flat indices ``idx``; PAD outside."""
    shape = seg.shape[1:]
    group, point = np.divmod(idx, int(np.prod(sampler.out_shape)))
    pixel = np.rint(sampler.pixel_coords(point)).astype(np.intp)
    inside = np.all((pixel >= 0) & (pixel < np.asarray(shape)), axis=1)
    out = np.full(idx.shape, PAD_SEG, dtype=np.int64)
    out[inside] = seg[(group[inside], *pixel[inside].T)]
    return out
