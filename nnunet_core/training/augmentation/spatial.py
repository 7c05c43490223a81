"""Rotation, scaling and optional elastic deformation, resampled once into the final patch.

Matches nnU-Net's ``SpatialTransform`` settings (batchgeneratorsv2): the final patch is cut from the
centre of the larger initial patch; the image is sampled bilinearly with zero padding; the
segmentation per label (``labels``): each label's indicator is sampled bilinearly and the top score
wins, the nearest neighbour settling ties; outside the input counts as the padding label -1. When
no rotation, scaling or deformation is drawn the patch is only cropped, without interpolation.

Under dummy 2D (anisotropic 3D patches) the transform runs in-plane, every slice with the same
2D rotation/scale, slices never mixed (upstream's Convert3DTo2D/Convert2DTo3D).

Speed: the parameters are drawn first (``draw``) and give the box of the input the sampling can
touch (``SpatialDraw.region``): the crop alone when nothing is drawn (two samples in three), the
rotated/scaled patch's bounding box otherwise. The loader reads only that box from the case
store, which is what a real-size initial patch (205^3 for a 128^3 patch) costs most. Image channels
and the needed label indicators are then sampled together (``interpolation``): a 3D rotation through
torch's vectorized 2D kernel (``TiledSampler``), 3D scaling alone as separable 1D passes, 2D and
deformed grids with torch ``grid_sample``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import ndimage as ndi

from nnunet_core.training.augmentation.interpolation import (
    GridSampler,
    ScalingSampler,
    TiledSampler,
)
from nnunet_core.training.augmentation.labels import PAD_SEG, resample

Range = tuple[float, float]
Box = tuple[tuple[int, ...], tuple[int, ...]]  # (lower corner, size) per spatial axis


@dataclass(frozen=True)
class SpatialDraw:
    """One sample's spatial parameters; ``region`` is the box of the input (every spatial axis)
    that applying them reads, ``center`` the patch centre in the (plane of the) whole input."""

    affine: np.ndarray | None  # None: crop only
    rotated: bool
    scale: float
    center: tuple[float, ...]
    offsets: np.ndarray | None  # elastic displacement (*plane patch, dim), or None
    region: Box


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
        draw = self.draw(data.shape[1:], rng)
        box = (slice(None), *(slice(a, a + n) for a, n in zip(*draw.region, strict=True)))
        return self.apply(data[box], seg[box], draw)

    def draw(
        self, shape: Sequence[int], rng: np.random.Generator, filled: Box | None = None
    ) -> SpatialDraw:
        """Everything random about one sample whose input has spatial ``shape``, in upstream's
        order, and the input region it needs. ``filled`` (lower, size), where given, is the part
        of the input that is not padding (data 0, seg -1, which is what the sampling assumes
        outside the input anyway): the region then stays inside it. A real-size brain is
        smaller than the initial patch: most of that patch would be padding."""
        shape = tuple(int(s) for s in shape)
        plane = shape[1:] if self.dummy_2d else shape
        if filled is None:
            bounds = [(0, s) for s in plane]
        else:
            cut = slice(1, None) if self.dummy_2d else slice(None)
            lows, sizes = filled[0][cut], filled[1][cut]
            bounds = [
                (max(a, 0), min(a + n, s)) for a, n, s in zip(lows, sizes, plane, strict=True)
            ]
        dim = len(plane)
        do_rotation = rng.random() < self.p_rotation
        do_scaling = rng.random() < self.p_scaling
        do_elastic = rng.random() < self.p_elastic
        angles = [rng.uniform(*r) for r in self.rotation] if do_rotation else None
        scale = rng.uniform(*self.scaling) if do_scaling else 1.0
        center = tuple(self._draw_center(plane, rng))
        affine = None
        offsets = None
        if do_rotation or do_scaling or do_elastic:
            affine = _affine_matrix(angles, scale, dim)
            offsets = _elastic_offsets(self, rng) if do_elastic else None
        region = _plane_region(affine, offsets, center, self.plane_patch, bounds)
        if self.dummy_2d:  # every slice (the slice axis is cropped in ``apply``)
            region = ((0, *region[0]), (shape[0], *region[1]))
        return SpatialDraw(affine, do_rotation, float(scale), center, offsets, region)

    def apply(
        self, data: np.ndarray, seg: np.ndarray, draw: SpatialDraw
    ) -> tuple[np.ndarray, np.ndarray]:
        """The drawn transform of the inputs' ``draw.region`` box: ``data`` (c, *box) float32,
        ``seg`` (k, *box) signed ints -> new arrays (c, *patch), (k, *patch)."""
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
        out_data, out_seg = self._apply(data, seg, draw)
        if self.dummy_2d:
            out_data = out_data.reshape(-1, *self.patch_size)
        return out_data, out_seg.reshape(-1, *self.patch_size)

    def _apply(
        self, data: np.ndarray, seg: np.ndarray, draw: SpatialDraw
    ) -> tuple[np.ndarray, np.ndarray]:
        """``seg`` is (k, groups, *plane): groups are the slices under dummy 2D, else 1."""
        shape = data.shape[1:]
        dim = len(shape)
        lower = draw.region[0][-dim:]
        center = [c - a for c, a in zip(draw.center, lower, strict=True)]  # in the region
        if draw.affine is None:
            k, g = seg.shape[:2]
            cropped = _crop(seg.reshape(k * g, *shape), center, self.plane_patch, PAD_SEG)
            return _crop(data, center, self.plane_patch, 0.0), cropped
        # fastest measured per case: 2D kernels are vectorized, the 3D one is not
        sampler: GridSampler | ScalingSampler | TiledSampler
        if dim == 3 and draw.offsets is None:
            if draw.rotated:
                sampler = TiledSampler(draw.affine, self.plane_patch, shape, center)
            else:
                sampler = ScalingSampler([draw.scale] * dim, self.plane_patch, shape, center)
        else:
            grid = _sampling_grid(draw.affine, self.plane_patch, shape, center, draw.offsets)
            sampler = GridSampler(grid, shape, affine_only=draw.offsets is None)
        return resample(data, seg, sampler)

    def _draw_center(self, shape: tuple[int, ...], rng: np.random.Generator) -> list[float]:
        """Patch centre in input pixels: the middle, or uniform in the allowed band."""
        if not self.random_crop:
            return [s / 2 for s in shape]
        center = []
        for s, d in zip(shape, self.center_dist, strict=True):
            center.append(s / 2 if s - d < d else rng.uniform(d, s - d))
        return center


def _plane_region(
    affine: np.ndarray | None,
    offsets: np.ndarray | None,
    center: Sequence[float],
    patch: Sequence[int],
    bounds: Sequence[tuple[int, int]],
) -> Box:
    """The box of the input that the transform reads, clipped to ``bounds`` ((lo, hi) per axis:
    the input, or its part that is not padding).

    Crop only: the crop. Affine: the pixels around the patch corners' images (their extremes),
    one voxel of margin for float32 rounding in the samplers; points beyond the box then lie
    outside the input (or on its padding) as well, so sampling the box alone gives the same
    values and the same padding. Elastic: all of ``bounds``.
    """
    if offsets is not None:
        lo, hi = [b[0] for b in bounds], [b[1] for b in bounds]
    elif affine is None:
        lo = [math.floor(c) - p // 2 for c, p in zip(center, patch, strict=True)]
        hi = [a + p for a, p in zip(lo, patch, strict=True)]
    else:
        half = (np.asarray(patch, dtype=np.float64) - 1) / 2
        corners = np.array(np.meshgrid(*[[-h, h] for h in half], indexing="ij")).reshape(
            len(patch), -1
        )
        pixels = affine @ corners + (np.asarray(center, dtype=np.float64) - 0.5)[:, None]
        lo = [math.floor(v) - 1 for v in pixels.min(1)]
        hi = [math.floor(v) + 3 for v in pixels.max(1)]  # exclusive: floor(max) + 1 and margin
    lo = [min(max(a, b0), b1) for a, (b0, b1) in zip(lo, bounds, strict=True)]
    hi = [min(max(b, b0), b1) for b, (b0, b1) in zip(hi, bounds, strict=True)]
    if any(b <= a for a, b in zip(lo, hi, strict=True)):  # nothing but padding: one voxel
        lo = [min(b0, b1 - 1) if b1 > 0 else 0 for b0, b1 in bounds]
        hi = [a + 1 for a in lo]
    return tuple(lo), tuple(b - a for a, b in zip(lo, hi, strict=True))


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
