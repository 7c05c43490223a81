"""Cascade input augmentation: the previous stage's segmentation as one-hot channels, perturbed.

A cascade stage (3d_cascade_fullres) sees the lower-resolution stage's prediction as extra input.
The loader carries that prediction as seg channel 1, so the spatial transform moves it exactly as
the target. At the end of upstream's training pipeline (after mirroring and seg -1 -> 0) it is
turned into one float channel per foreground label appended to the image, and then deliberately
damaged, so that the network learns to correct the previous stage rather than copy it:

1. ``MoveSegAsOneHotToDataTransform(source_channel_idx=1, all_labels=foreground_labels)``: always.
2. ``ApplyRandomBinaryOperatorTransform(strel_size=(1, 8), p_per_label=0.5)`` at p=0.4: labels in
   random order, each with p=0.5, get dilation, erosion, closing or opening (uniform) with a
   skimage ``ball`` (3D) or ``disk`` (2D) of radius ~ U(1, 8); voxels a label gains are cleared
   in the other labels' channels.
3. ``RemoveRandomConnectedComponentFromOneHotEncodingTransform(fill_with_other_class_p=0,
   dont_do_if_covers_more_than_x_percent=0.15, p_per_label=0.5)`` at p=0.2: labels in random order,
   each with p=0.5, lose one connected component (full connectivity) drawn uniformly among those
   smaller than 15% of the patch.

Validation does step 1 only. All randomness comes from the numpy Generator passed in, in a fixed
order, so a sample's output is a function of its rng seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from nnunet_core.inference.cascade_input import one_hot_foreground

SOURCE_SEG_CHANNEL = 1  # upstream source_channel_idx: the previous stage travels as seg channel 1
P_BINARY_OPERATOR = 0.4  # upstream RandomTransform apply_probability
P_REMOVE_COMPONENT = 0.2
P_PER_LABEL = 0.5  # both transforms, upstream p_per_label
STREL_RADIUS = (1.0, 8.0)  # upstream strel_size, sampled as U(lo, hi) (a float radius)
MAX_COMPONENT_FRACTION = 0.15  # upstream dont_do_if_covers_more_than_x_percent (a fraction)
FILL_WITH_OTHER_CLASS_P = 0.0  # upstream fill_with_other_class_p in nnU-Net's pipeline

Operator = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- one-hot ------------------------------------------------------------------------------------


def move_seg_as_one_hot(
    data: np.ndarray,
    seg: np.ndarray,
    labels: Sequence[int],
    source_channel: int = SOURCE_SEG_CHANNEL,
) -> tuple[np.ndarray, np.ndarray]:
    """Append one channel per label (1 where seg[source_channel] == label, else 0, in the data's
    dtype, in ``labels`` order) to ``data``; drop that seg channel. Returns new arrays."""
    if seg.shape[0] <= source_channel:
        raise ValueError(
            f"cascade needs the previous stage as seg channel {source_channel}, "
            f"got {seg.shape[0]} seg channel(s)"
        )
    one_hot = one_hot_foreground(seg[source_channel], labels, data.dtype)
    keep = [c for c in range(seg.shape[0]) if c != source_channel]
    return np.concatenate((data, one_hot), axis=0), seg[keep]


# --- morphology ---------------------------------------------------------------------------------


def structuring_element(radius: float, ndim: int) -> np.ndarray:
    """Upstream's strel: skimage ``disk`` for 2D masks, ``ball`` otherwise (float radius kept, so
    fractional radii give skimage's even-sized elements)."""
    from skimage.morphology import ball, disk  # only cascade folds need it: not every fold's start

    return disk(radius, dtype=bool) if ndim == 2 else ball(radius, dtype=bool)


def dilation(mask: np.ndarray, strel: np.ndarray) -> np.ndarray:
    """Binary dilation, outside the array counting as background.

    Upstream correlates with the element, padded (k-1)//2 before each axis (torch 'same'), and
    keeps counts that round above 0. Correlation is convolution with the flipped element (which
    matters: skimage's fractional-radius elements are not always symmetric); the same window is
    cut from an FFT convolution, which stays fast for radius-8 balls. float32 as upstream: twice
    as fast as float64, and the counts' error (~5e-4 at 128^3, radius 8) is far below 0.5."""
    if not mask.any():
        return np.zeros(mask.shape, dtype=bool)
    from scipy.signal import fftconvolve  # ~1 s to import; only cascade folds need it

    flipped = np.flip(strel).astype(np.float32)
    counts = fftconvolve(mask.astype(np.float32), flipped, mode="full")
    window = tuple(slice(k // 2, k // 2 + n) for k, n in zip(strel.shape, mask.shape, strict=True))
    return np.rint(counts[window]) > 0


def erosion(mask: np.ndarray, strel: np.ndarray) -> np.ndarray:
    """Binary erosion as upstream: the complement's dilation, so outside counts as foreground."""
    return ~dilation(~mask, strel)


def opening(mask: np.ndarray, strel: np.ndarray) -> np.ndarray:
    """Erosion then dilation (removes parts thinner than the element)."""
    return dilation(erosion(mask, strel), strel)


def closing(mask: np.ndarray, strel: np.ndarray) -> np.ndarray:
    """Dilation then erosion (fills gaps narrower than the element)."""
    return erosion(dilation(mask, strel), strel)


BINARY_OPERATORS: tuple[Operator, ...] = (dilation, erosion, closing, opening)  # upstream's order


# --- random binary operator ---------------------------------------------------------------------


@dataclass(frozen=True)
class BinaryOperation:
    """One label's drawn perturbation: which channel, which operator, which radius."""

    channel: int
    operator: int  # index into BINARY_OPERATORS
    radius: float


def _draw_labels(
    channels: Sequence[int], p_per_label: float, rng: np.random.Generator
) -> list[int]:
    """Channels in random order, each kept with ``p_per_label`` (upstream shuffles, then tests)."""
    order = [channels[i] for i in rng.permutation(len(channels))]
    keep = rng.random(len(order)) < p_per_label
    return [c for c, k in zip(order, keep, strict=True) if k]


def draw_binary_operations(
    channels: Sequence[int],
    rng: np.random.Generator,
    strel_radius: tuple[float, float] = STREL_RADIUS,
    p_per_label: float = P_PER_LABEL,
) -> list[BinaryOperation]:
    """The random part of upstream's ApplyRandomBinaryOperatorTransform, in its draw order."""
    chosen = _draw_labels(channels, p_per_label, rng)
    operators = [int(rng.integers(len(BINARY_OPERATORS))) for _ in chosen]
    lo, hi = strel_radius
    radii = [float(lo) if lo == hi else float(rng.uniform(lo, hi)) for _ in chosen]
    return [BinaryOperation(*args) for args in zip(chosen, operators, radii, strict=True)]


def apply_binary_operations(
    data: np.ndarray, channels: Sequence[int], operations: Sequence[BinaryOperation]
) -> np.ndarray:
    """Apply the operations in order, in place; voxels a label gains leave the other channels."""
    for op in operations:
        before = data[op.channel].astype(bool)
        strel = structuring_element(op.radius, before.ndim)
        after = BINARY_OPERATORS[op.operator](before, strel)
        gained = after & ~before
        for other in channels:
            if _index(other, data) != _index(op.channel, data):
                data[other][gained] = 0
        data[op.channel] = after
    return data


def apply_random_binary_operator(
    data: np.ndarray,
    channels: Sequence[int],
    rng: np.random.Generator,
    strel_radius: tuple[float, float] = STREL_RADIUS,
    p_per_label: float = P_PER_LABEL,
) -> np.ndarray:
    """Upstream's ApplyRandomBinaryOperatorTransform on the one-hot ``channels`` (in place)."""
    operations = draw_binary_operations(channels, rng, strel_radius, p_per_label)
    return apply_binary_operations(data, channels, operations)


# --- random connected component -----------------------------------------------------------------


def label_components(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Connected components with full connectivity (8 in 2D, 26 in 3D: skimage ``label``'s
    default, which upstream uses) and their sizes (index i is component i + 1)."""
    labelled, _ = ndi.label(mask, structure=np.ones((3,) * mask.ndim, dtype=bool))
    return labelled, np.bincount(labelled.ravel())[1:]


def remove_random_connected_component(
    data: np.ndarray,
    channels: Sequence[int],
    rng: np.random.Generator,
    p_per_label: float = P_PER_LABEL,
    max_fraction: float = MAX_COMPONENT_FRACTION,
    fill_with_other_class_p: float = FILL_WITH_OTHER_CLASS_P,
) -> np.ndarray:
    """Upstream's RemoveRandomConnectedComponentFromOneHotEncodingTransform (in place).

    Each drawn label loses one whole component, uniform among those with fewer voxels than
    ``max_fraction`` of the patch (none removed if all are larger); with
    ``fill_with_other_class_p`` the hole goes to another channel, drawn uniformly."""
    for channel in _draw_labels(channels, p_per_label, rng):
        mask = data[channel].astype(bool)
        if not mask.any():
            continue
        labelled, sizes = label_components(mask)
        valid = np.flatnonzero(sizes < mask.size * max_fraction) + 1
        if len(valid) == 0:
            continue
        hole = labelled == valid[rng.integers(len(valid))]
        data[channel][hole] = 0
        if rng.random() < fill_with_other_class_p:
            others = [c for c in channels if _index(c, data) != _index(channel, data)]
            if others:
                data[others[rng.integers(len(others))]][hole] = 1
    return data


def _index(channel: int, data: np.ndarray) -> int:
    """Non-negative channel index (upstream addresses the one-hot channels from the end)."""
    return channel % data.shape[0]


# --- pipeline steps -----------------------------------------------------------------------------


class CascadeTraining:
    """Upstream's cascade steps of the training pipeline: (data, seg, rng) -> (data, seg).

    ``data`` gains one channel per foreground label (the last ones); seg loses channel 1."""

    def __init__(self, foreground_labels: Sequence[int]) -> None:
        self.labels = tuple(int(label) for label in foreground_labels)

    def __call__(
        self, data: np.ndarray, seg: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        data, seg = move_seg_as_one_hot(data, seg, self.labels)
        channels = list(range(-len(self.labels), 0))
        if rng.random() < P_BINARY_OPERATOR:
            apply_random_binary_operator(data, channels, rng)
        if rng.random() < P_REMOVE_COMPONENT:
            remove_random_connected_component(data, channels, rng)
        return data, seg


class CascadeValidation:
    """Upstream's cascade step of the validation pipeline: the one-hot only (no randomness)."""

    def __init__(self, foreground_labels: Sequence[int]) -> None:
        self.labels = tuple(int(label) for label in foreground_labels)

    def __call__(self, data: np.ndarray, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return move_seg_as_one_hot(data, seg, self.labels)
