"""Bilinear/trilinear sampling of image channels and label indicators at the patch's points.

All samplers follow grid_sample's align_corners=False, zero-padding convention, where output
index p reads input pixel A @ (p - (patch - 1) / 2) + center - 0.5 (upstream's geometry), and
take ``parts``: arrays (k, *in_shape), float32 or bool, sampled together as sum(k) channels.
``GridSampler`` handles any grid (2D, or deformed) with one torch ``grid_sample`` call.
``TiledSampler`` handles a 3D affine map through the vectorized 2D kernel (see there).
``ScalingSampler`` handles pure scaling: trilinear interpolation is then a product of 1D linear
interpolations, so one cheap pass per axis gives the same values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch.nn.functional import grid_sample

CACHE_BYTES = 2 << 20  # input planes sampled per grid_sample call (see GridSampler.sample)


class GridSampler:
    """Sampling at a grid (*patch, dim) of normalized (x, y[, z]) coordinates."""

    def __init__(self, grid: np.ndarray, in_shape: Sequence[int], affine_only: bool) -> None:
        self.grid = grid
        self.in_shape = tuple(in_shape)
        self.out_shape = grid.shape[:-1]
        dim = grid.shape[-1]
        # an affine grid takes its extremes at the patch corners
        points = grid[np.ix_(*[[0, -1]] * dim)] if affine_only else grid
        pixels = self._to_pixels(points.reshape(-1, dim))
        self.reaches_outside = _outside(pixels.min(0), pixels.max(0), self.in_shape)

    def sample(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """-> (sum(k), *patch) float32, grid_sample over cache-sized groups of channels.

        The kernel visits every channel at each point, so with many channels (dummy 2D: one per
        slice) their planes evict each other; groups of ~CACHE_BYTES run 2-4x faster.
        """
        stack = torch.from_numpy(_stack(parts, self.in_shape))[None]
        grid = torch.from_numpy(self.grid)[None]
        n = stack.shape[1]
        step = max(1, CACHE_BYTES // (4 * math.prod(self.in_shape)))
        out = np.empty((n, *self.out_shape), dtype=np.float32)
        for i in range(0, n, step):
            out[i : i + step] = grid_sample(
                stack[:, i : i + step],
                grid,
                mode="bilinear",
                padding_mode="zeros",
                align_corners=False,
            )[0].numpy()
        return out

    def inside_weight(self) -> np.ndarray:
        """Share of each point's bilinear weight that falls on input pixels (1 inside)."""
        weight = np.ones(self.out_shape, dtype=np.float32)
        dim = len(self.in_shape)
        for axis, size in enumerate(self.in_shape):
            pixel = self.grid[..., dim - 1 - axis] + np.float32(1)
            pixel *= np.float32(size / 2)
            pixel -= np.float32(0.5)
            weight *= _axis_inside(pixel, size)
        return weight

    def pixel_coords(self, points: np.ndarray) -> np.ndarray:
        """Input pixel coordinates (n, dim), axis order, of flat output indices ``points``."""
        return self._to_pixels(self.grid.reshape(-1, self.grid.shape[-1])[points])

    def _to_pixels(self, normalized: np.ndarray) -> np.ndarray:
        size = np.asarray(self.in_shape, dtype=np.float64)
        return ((normalized[:, ::-1].astype(np.float64) + 1) * size - 1) / 2


class TiledSampler:
    """Trilinear sampling for a 3D affine map through torch's vectorized 2D kernel.

    Why: grid_sample's 3D CPU kernel is scalar (~40 ns per point and channel); the 2D one is
    vectorized. Trilinear = a linear blend along axis 0 of bilinear samples on slices z0 and
    z0 + 1. The slices are laid out as tiles of a near-square 2D mosaic, each followed by a zero
    row and a zero column so that zero padding still holds in-plane; every output voxel gets two
    2D sample points (its two slices). The mosaic is only ~sqrt(Z) tiles a side, so float32
    coordinates stay within ~1e-4 pixel. One channel per call: the 2D kernel slows down
    sharply when several channel planes compete for the cache.
    """

    def __init__(
        self,
        affine: np.ndarray,
        patch: Sequence[int],
        in_shape: Sequence[int],
        center: Sequence[float],
    ) -> None:
        self.in_shape = depth, _, _ = tuple(in_shape)
        self.out_shape = tuple(patch)
        q = [np.arange(p, dtype=np.float64) - (p - 1) / 2 for p in patch]
        offset = np.asarray(center, dtype=np.float64) - 0.5
        self.coords = []  # input pixel coordinate per axis, each (*patch)
        lows, highs = [], []
        for i in range(3):
            terms = [(q[j] * affine[i, j]).astype(np.float32) for j in range(3)]
            terms[2] += np.float32(offset[i])
            c = np.empty(self.out_shape, dtype=np.float32)
            np.add(terms[0][:, None, None], terms[1][None, :, None], out=c)
            c += terms[2]
            self.coords.append(c)
            lows.append(sum(t.min() for t in terms))
            highs.append(sum(t.max() for t in terms))
        self.reaches_outside = _outside(np.array(lows), np.array(highs), self.in_shape)
        n_tiles = depth + 3  # tile t holds slice t - 1; tiles 0, depth + 1, depth + 2 stay zero
        self.cols = math.ceil(math.sqrt(n_tiles))
        self.rows = math.ceil(n_tiles / self.cols)
        self.grid, self.frac = self._build_grid()

    def _build_grid(self) -> tuple[np.ndarray, np.ndarray]:
        """(1, 2, n, 2) normalized mosaic points: row 0 on slice z0, row 1 on slice z0 + 1."""
        depth, height, width = self.in_shape
        cz = np.clip(self.coords[0], -1, depth)
        z0 = np.floor(cz)
        frac = (cz - z0).reshape(-1)
        tile = z0.astype(np.int32).reshape(-1) + 1
        grid = np.empty((1, 2, frac.size, 2), dtype=np.float32)
        within = []  # normalized position inside tile (0, 0), per grid axis (x, y)
        steps = []  # normalized size of one tile, per grid axis
        for pixel, size, n_tiles in (
            (self.coords[2], width, self.cols),
            (self.coords[1], height, self.rows),
        ):
            extent = n_tiles * (size + 1)
            norm = np.clip(pixel, -1, size).reshape(-1)
            norm *= np.float32(2 / extent)
            norm += np.float32(1 / extent - 1)
            within.append(norm)
            steps.append(np.float32(2 * (size + 1) / extent))
        buffer = np.empty(frac.size, dtype=np.float32)
        for k in range(2):
            tile_row = (tile + k) // self.cols
            tile_col = tile + k - tile_row * self.cols
            for axis, index in enumerate((tile_col, tile_row)):
                np.multiply(index, steps[axis], out=buffer)
                buffer += within[axis]
                grid[0, k, :, axis] = buffer
        return grid, frac

    def sample(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """-> (sum(k), *patch) float32: per channel one 2D grid_sample over both slices."""
        _, height, width = self.in_shape
        mosaic = np.zeros((self.rows, height + 1, self.cols, width + 1), dtype=np.float32)
        flat = torch.from_numpy(mosaic.reshape(1, 1, self.rows * (height + 1), -1))
        grid = torch.from_numpy(self.grid)
        out = np.empty((sum(p.shape[0] for p in parts), self.frac.size), dtype=np.float32)
        i = 0
        for part in parts:
            for volume in part:
                self._place(mosaic, volume)  # only tile interiors change: padding stays zero
                both = grid_sample(
                    flat, grid, mode="bilinear", padding_mode="zeros", align_corners=False
                )[0, 0].numpy()
                np.subtract(both[1], both[0], out=out[i])
                out[i] *= self.frac
                out[i] += both[0]
                i += 1
        return out.reshape(-1, *self.out_shape)

    def _place(self, mosaic: np.ndarray, volume: np.ndarray) -> None:
        """Write slice z of ``volume`` (Z, Y, X) into tile z + 1, one row of tiles at a time."""
        depth, height, width = self.in_shape
        for r in range(self.rows):
            lo, hi = max(r * self.cols, 1), min((r + 1) * self.cols, depth + 1)
            if hi <= lo:
                break
            src = volume[lo - 1 : hi - 1].transpose(1, 0, 2)
            mosaic[r, :height, lo - r * self.cols : hi - r * self.cols, :width] = src

    def inside_weight(self) -> np.ndarray:
        """Share of each point's trilinear weight that falls on input voxels (1 inside)."""
        weight = np.ones(self.out_shape, dtype=np.float32)
        for c, size in zip(self.coords, self.in_shape, strict=True):
            weight *= _axis_inside(c, size)
        return weight

    def pixel_coords(self, points: np.ndarray) -> np.ndarray:
        """Input pixel coordinates (n, dim), axis order, of flat output indices ``points``."""
        return np.stack([c.reshape(-1)[points] for c in self.coords], axis=1)


class ScalingSampler:
    """Sampling for a diagonal transform (scaling, no rotation) as separable 1D passes."""

    def __init__(
        self,
        scales: Sequence[float],
        patch: Sequence[int],
        in_shape: Sequence[int],
        center: Sequence[float],
    ) -> None:
        self.in_shape = tuple(in_shape)
        self.out_shape = tuple(patch)
        self.coords = [
            s * (np.arange(p, dtype=np.float64) - (p - 1) / 2) + c - 0.5
            for s, p, c in zip(scales, patch, center, strict=True)
        ]
        lows = [c.min() for c in self.coords]
        highs = [c.max() for c in self.coords]
        self.reaches_outside = _outside(np.array(lows), np.array(highs), self.in_shape)
        self.taps = [
            _linear_taps(c, size) for c, size in zip(self.coords, self.in_shape, strict=True)
        ]

    def sample(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """-> (sum(k), *patch) float32: one 1D linear pass per axis."""
        x = _stack(parts, self.in_shape)
        dim = len(self.in_shape)
        for axis, (i0, i1, w0, w1) in enumerate(self.taps):
            shape = [1] * (dim + 1)
            shape[axis + 1] = -1
            low = np.take(x, i0, axis=axis + 1, mode="clip")  # indices are in range
            low *= w0.reshape(shape)
            high = np.take(x, i1, axis=axis + 1, mode="clip")
            high *= w1.reshape(shape)
            low += high
            x = low
        return x

    def inside_weight(self) -> np.ndarray:
        """Share of each point's weight on input pixels: the outer product of per-axis shares."""
        weight = np.ones((), dtype=np.float32)
        for c, size in zip(self.coords, self.in_shape, strict=True):
            weight = np.multiply.outer(weight, _axis_inside(c, size))
        return weight

    def pixel_coords(self, points: np.ndarray) -> np.ndarray:
        """Input pixel coordinates (n, dim), axis order, of flat output indices ``points``."""
        index = np.unravel_index(points, self.out_shape)
        return np.stack([c[i] for c, i in zip(self.coords, index, strict=True)], axis=1)


def _stack(parts: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray:
    """One float32 (sum(k), *shape) array from the parts (bool parts become 0/1)."""
    stack = np.empty((sum(p.shape[0] for p in parts), *shape), dtype=np.float32)
    i = 0
    for part in parts:
        stack[i : i + part.shape[0]] = part
        i += part.shape[0]
    return stack


def _linear_taps(coords: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """Neighbour indices and zero-padded linear weights of 1D sample positions."""
    floor = np.floor(coords)
    frac = (coords - floor).astype(np.float32)
    low = floor.astype(np.intp)
    high = low + 1
    w_low = np.where((low >= 0) & (low < size), 1 - frac, 0).astype(np.float32)
    w_high = np.where((high >= 0) & (high < size), frac, 0).astype(np.float32)
    return np.clip(low, 0, size - 1), np.clip(high, 0, size - 1), w_low, w_high


def _axis_inside(pixel: np.ndarray, size: int) -> np.ndarray:
    """Linear weight on pixels 0..size-1 at a position: 1 inside, falling to 0 one pixel out."""
    weight = np.minimum(pixel + 1, size - pixel).astype(np.float32, copy=False)
    return np.clip(weight, 0, 1, out=weight)


def _outside(lo: np.ndarray, hi: np.ndarray, shape: Sequence[int]) -> bool:
    """Whether positions spanning [lo, hi] per axis read pixels outside 0..size-1."""
    return bool(np.any(lo < 0) or np.any(hi > np.asarray(shape) - 1))
