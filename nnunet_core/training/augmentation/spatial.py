"""Rotation, scaling and optional elastic deformation, resampled once into the final patch.

Matches nnU-Net's ``SpatialTransform`` settings (batchgeneratorsv2): the final patch is cut from the
centre of the larger initial patch; the image is sampled bilinearly with zero padding; the
segmentation per label: each label's indicator is sampled bilinearly and the top score wins, the
nearest neighbour settling ties; outside the input counts as the padding label -1. When no
rotation, scaling or deformation is drawn the patch is only cropped, without interpolation.

Under dummy 2D (anisotropic 3D patches) the transform runs in-plane, every slice with the same
2D rotation/scale, slices never mixed (upstream's Convert3DTo2D/Convert2DTo3D).

Speed: image channels and the needed label indicators are sampled together (``sampling``): a 3D
rotation through torch's vectorized 2D kernel (``TiledSampler``), 3D scaling alone as separable
1D passes, 2D and deformed grids with torch ``grid_sample``. One label per seg channel needs no
indicator (its score is the rest of the weight) and the weight falling outside the input is
computed, not sampled, so a binary segmentation costs one extra channel.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import ndimage as ndi

from nnunet_core.training.augmentation.sampling import GridSampler, ScalingSampler, TiledSampler

Sampler = GridSampler | ScalingSampler | TiledSampler

PAD_SEG = -1  # upstream padding_value_seg=-1 (border_mode_seg='constant')
# Scores this close to the top count as tied. Upstream keeps scores as float16 at scale 1000,
# which cannot tell apart differences below ~2.5e-4 near the 0.5 threshold.
TIE_TOLERANCE = 2.5e-4

Range = tuple[float, float]


class SpatialTransform:
    """Per-sample spatial augmentation; all randomness comes from the ``rng`` passed in."""

    def __init__(
        self,
        patch_size: Sequence[int],
        rotation: Range | Sequence[Range] = (-math.pi / 6, math.pi / 6),
        p_rotation: float = 0.2,  # upstream p_rotation=0.2, every axis rotated (p_rot_per_axis=1)
        scaling: Range = (0.7, 1.4),  # upstream scaling=(0.7, 1.4), one factor for all axes
        p_scaling: float = 0.2,  # upstream p_scaling=0.2, p_synchronize_scaling_across_axes=1
        p_elastic: float = 0.0,  # upstream p_elastic_deform=0: off
        elastic_scale: Range = (0.0, 0.2),  # blur sigma as a fraction of the patch edge (upstream)
        elastic_magnitude: Range = (0.0, 0.2),  # largest displacement in pixels (upstream)
        dummy_2d: bool = False,
        random_crop: bool = False,  # upstream random_crop=False: centre crop
        center_dist_from_border: int | Sequence[int] = 0,
    ) -> None:
        self.patch_size = tuple(int(p) for p in patch_size)
        self.dummy_2d = dummy_2d
        self.plane_patch = self.patch_size[1:] if dummy_2d else self.patch_size
        dim = len(self.plane_patch)
        if dim not in (2, 3):
            raise ValueError(f"spatial transform needs a 2D or 3D patch, got {self.plane_patch}")
        n_angles = 3 if dim == 3 else 1
        ranges = _as_ranges(rotation, n_angles)
        self.rotation = ranges
        self.p_rotation = p_rotation
        self.scaling = scaling
        self.p_scaling = p_scaling
        self.p_elastic = p_elastic
        self.elastic_scale = elastic_scale
        self.elastic_magnitude = elastic_magnitude
        self.random_crop = random_crop
        dist = center_dist_from_border
        self.center_dist = tuple(dist) if isinstance(dist, Sequence) else (dist,) * dim

    def __call__(
        self, data: np.ndarray, seg: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``data`` (c, *spatial) float32, ``seg`` (k, *spatial) signed ints -> new arrays."""
        if self.dummy_2d:
            # slices become channels, as upstream's Convert3DTo2DTransform does
            n_slices = self.patch_size[0]
            data = _crop_axis(data, 1, n_slices, 0.0)
            seg = _crop_axis(seg, 1, n_slices, PAD_SEG)
            c, k = data.shape[0], seg.shape[0]
            data = data.reshape(c * n_slices, *data.shape[2:])
            seg = seg.reshape(k, n_slices, *seg.shape[2:])
        else:
            seg = seg[:, None]
        out_data, out_seg = self._apply(data, seg, rng)
        if self.dummy_2d:
            out_data = out_data.reshape(-1, *self.patch_size)
        return out_data, out_seg.reshape(-1, *self.patch_size)

    def _apply(
        self, data: np.ndarray, seg: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``seg`` is (k, groups, *plane): groups are the slices under dummy 2D, else 1."""
        shape = data.shape[1:]
        dim = len(shape)
        do_rotation = rng.random() < self.p_rotation
        do_scaling = rng.random() < self.p_scaling
        do_elastic = rng.random() < self.p_elastic
        angles = [rng.uniform(*r) for r in self.rotation] if do_rotation else None
        scale = rng.uniform(*self.scaling) if do_scaling else 1.0
        center = self._draw_center(shape, rng)
        if not (do_rotation or do_scaling or do_elastic):
            k, g = seg.shape[:2]
            cropped = _crop(seg.reshape(k * g, *shape), center, self.plane_patch, PAD_SEG)
            return _crop(data, center, self.plane_patch, 0.0), cropped
        affine = _affine_matrix(angles, scale, dim)
        offsets = _elastic_offsets(self, rng) if do_elastic else None
        # fastest measured per case: 2D kernels are vectorized, the 3D one is not
        if dim == 3 and offsets is None:
            if do_rotation:
                sampler = TiledSampler(affine, self.plane_patch, shape, center)
            else:
                sampler = ScalingSampler([scale] * dim, self.plane_patch, shape, center)
        else:
            grid = _sampling_grid(affine, self.plane_patch, shape, center, offsets)
            sampler = GridSampler(grid, shape, affine_only=offsets is None)
        return _resample(data, seg, sampler)

    def _draw_center(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[float]:
        """Patch centre in input pixels: the middle, or uniform in the allowed band."""
        if not self.random_crop:
            return [s / 2 for s in shape]
        center = []
        for s, d in zip(shape, self.center_dist, strict=True):
            center.append(s / 2 if s - d < d else rng.uniform(d, s - d))
        return center


def _as_ranges(rotation: Range | Sequence[Range], n: int) -> tuple[Range, ...]:
    """One (lo, hi) for every axis, or one per axis (the last ``n`` are used)."""
    if len(rotation) == 2 and all(isinstance(v, (int, float)) for v in rotation):
        return (tuple(map(float, rotation)),) * n  # type: ignore[return-value]
    ranges = tuple((float(lo), float(hi)) for lo, hi in rotation)  # type: ignore[misc]
    return ranges[-n:]


def _affine_matrix(angles: list[float] | None, scale: float, dim: int) -> np.ndarray:
    """Rotation (Rz @ Ry @ Rx in 3D, as upstream) times the isotropic scale."""
    if angles is None:
        return np.eye(dim) * scale
    if dim == 2:
        c, s = math.cos(angles[0]), math.sin(angles[0])
        return np.array([[c, -s], [s, c]]) * scale
    (cx, sx), (cy, sy), (cz, sz) = ((math.cos(a), math.sin(a)) for a in angles)
    rot_x = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    rot_y = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rot_z = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rot_z @ rot_y @ rot_x * scale


def _elastic_offsets(t: SpatialTransform, rng: np.random.Generator) -> np.ndarray:
    """Smooth random displacement field (*patch, dim) in pixels, as upstream's elastic deform."""
    patch = t.plane_patch
    dim = len(patch)
    offsets = np.empty((*patch, dim), dtype=np.float32)
    axes = tuple(range(dim))
    for d in range(dim):
        sigma = rng.uniform(*t.elastic_scale) * patch[d]
        magnitude = rng.uniform(*t.elastic_magnitude)
        noise = rng.standard_normal(patch)
        spectrum = ndi.fourier_gaussian(np.fft.rfftn(noise), sigma, n=patch[-1])
        field = np.fft.irfftn(spectrum, s=patch, axes=axes)
        field *= max(magnitude, 1e-8) / max(np.abs(field).max(), 1e-12)
        offsets[..., d] = field
    return offsets


def _sampling_grid(
    affine: np.ndarray,
    patch: tuple[int, ...],
    shape: tuple[int, ...],
    center: Sequence[float],
    offsets: np.ndarray | None,
) -> np.ndarray:
    """grid_sample grid (*patch, dim) in normalized (x, y[, z]) order, align_corners=False.

    Input pixel = affine @ (p - (patch - 1) / 2) + center - 0.5 (upstream's convention).
    """
    dim = len(patch)
    half = np.asarray(shape, dtype=np.float64) / 2
    shift = (np.asarray(center, dtype=np.float64) - half) / half
    norm = (affine / half[:, None])[::-1]  # rows in grid order (x first)
    axes = [np.arange(p, dtype=np.float64) - (p - 1) / 2 for p in patch]
    if offsets is None:
        # one grid component at a time: contiguous broadcast adds, then a strided store
        grid = np.empty((*patch, dim), dtype=np.float32)
        comp = np.empty(patch, dtype=np.float32)
        for k in range(dim):
            parts = [(axes[j] * norm[k, j]).astype(np.float32) for j in range(dim)]
            parts[-1] += np.float32(shift[dim - 1 - k])
            if dim == 2:
                np.add(parts[0][:, None], parts[1][None], out=comp)
            else:
                np.add(parts[0][:, None, None], parts[1][None, :, None], out=comp)
                comp += parts[2]
            grid[..., k] = comp
        return grid
    points = np.stack(np.meshgrid(*axes, indexing="ij"), -1) + offsets
    moved = points @ affine.T
    moved -= moved.reshape(-1, dim).mean(0)  # upstream centres the deformed grid
    return ((moved / half) + shift)[..., ::-1].astype(np.float32)


def _crop_axis(x: np.ndarray, axis: int, size: int, pad: float) -> np.ndarray:
    """Centre crop / pad one axis to ``size`` (a no-op view when it already fits)."""
    if x.shape[axis] == size:
        return x
    shape = list(x.shape)
    center = [s / 2 for s in shape[1:]]
    patch = shape[1:]
    patch[axis - 1] = size
    return _crop(x, center, tuple(patch), pad)


def _crop(x: np.ndarray, center: Sequence[float], patch: tuple[int, ...], pad: float) -> np.ndarray:
    """Copy of the patch starting at floor(center) - patch // 2, padded with ``pad`` outside."""
    starts = [math.floor(c) - p // 2 for c, p in zip(center, patch, strict=True)]
    if all(0 <= a and a + p <= s for a, p, s in zip(starts, patch, x.shape[1:], strict=True)):
        box = (slice(a, a + p) for a, p in zip(starts, patch, strict=True))
        return x[(slice(None), *box)].copy()
    out = np.full((x.shape[0], *patch), pad, dtype=x.dtype)
    src, dst = [slice(None)], [slice(None)]
    for start, p, s in zip(starts, patch, x.shape[1:], strict=True):
        lo, hi = max(start, 0), min(start + p, s)
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - start, hi - start))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _resample(data: np.ndarray, seg: np.ndarray, sampler: Sampler) -> tuple[np.ndarray, np.ndarray]:
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
