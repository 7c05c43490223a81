"""Phantoms of the synthetic dataset: a body with an organ and a lesion, in 2-D or 3-D.

Everything is drawn from the ``rng`` passed in, so a seed fixes every voxel. Shapes live in
normalised index coordinates (each axis spans [-1, 1]), which keeps the body inside the image on
every axis whatever the shape and spacing: the exact zeros around it are what cropping removes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter

BACKGROUND, ORGAN, LESION = 0, 1, 2

# (body, organ, lesion) mean intensity per channel; later channels swap the contrasts so that each
# channel carries information, as T1/T2/FLAIR do.
CONTRASTS = ((100.0, 160.0, 60.0), (80.0, 50.0, 170.0), (120.0, 90.0, 200.0), (60.0, 140.0, 110.0))
NOISE_STD = 18.0
LESION_PROBABILITY = 0.9


@dataclass(frozen=True)
class Phantom:
    """One case: float32 channels ``(c, *shape)`` (exact 0 outside the body) and a uint8 label
    map."""

    images: np.ndarray
    label: np.ndarray


def _grid(shape: tuple[int, ...]) -> list[np.ndarray]:
    """Normalised coordinates per axis, broadcastable (open grid), in [-1, 1]."""
    axes = [np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1) for n in shape]
    return list(np.meshgrid(*axes, indexing="ij", sparse=True))


def _ellipsoid(
    grid: list[np.ndarray],
    center: np.ndarray,
    radii: np.ndarray,
    angle: float = 0.0,
    wobble: tuple[float, int, float] = (0.0, 0, 0.0),
) -> np.ndarray:
    """Ellipsoid, rotated by ``angle`` in the last two axes, with a wavy rim (amplitude, lobes,
    phase)."""
    offsets = [g - c for g, c in zip(grid, center, strict=True)]
    a, b = offsets[-2], offsets[-1]
    cos, sin = np.cos(angle), np.sin(angle)
    offsets[-2], offsets[-1] = cos * a - sin * b, sin * a + cos * b
    rho = sum((o / r) ** 2 for o, r in zip(offsets, radii, strict=True))
    amplitude, lobes, phase = wobble
    if amplitude:
        theta = np.arctan2(offsets[-2], offsets[-1])
        return rho < (1.0 + amplitude * np.sin(lobes * theta + phase)) ** 2
    return rho < 1.0


def _unrotate(local: np.ndarray, angle: float) -> np.ndarray:
    """Map an offset in an ellipsoid's own frame back to the grid (inverse of its rotation)."""
    out = local.copy()
    cos, sin = np.cos(angle), np.sin(angle)
    out[-2], out[-1] = cos * local[-2] + sin * local[-1], -sin * local[-2] + cos * local[-1]
    return out


def _ensure_voxel(mask: np.ndarray, center: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Tiny images can miss a small structure entirely; keep at least its centre voxel."""
    if mask.any():
        return mask
    index = tuple(
        int(np.clip(round((c + 1.0) / 2.0 * (n - 1)), 0, n - 1))
        for c, n in zip(center, mask.shape, strict=True)
    )
    if allowed[index]:
        mask = mask.copy()
        mask[index] = True
    return mask


def _label_map(
    rng: np.random.Generator, shape: tuple[int, ...], lesion_scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Body mask and label map (0 background/body, 1 organ, 2 lesion); ``lesion_scale`` multiplies
    the lesion's radii after every draw, so the generator's stream (and at 1.0 every voxel) stays
    the same."""
    ndim = len(shape)
    grid = _grid(shape)
    body_center = rng.uniform(-0.06, 0.06, ndim)
    body_radii = rng.uniform(0.68, 0.86, ndim)
    wobble = (
        float(rng.uniform(0.03, 0.1)),
        int(rng.integers(2, 6)),
        float(rng.uniform(0, 2 * np.pi)),
    )
    body = _ellipsoid(grid, body_center, body_radii, wobble=wobble)

    organ_radii = body_radii * rng.uniform(0.42, 0.58, ndim)
    organ_center = body_center + rng.uniform(-0.35, 0.35, ndim) * (body_radii - organ_radii)
    angle = float(rng.uniform(0.0, np.pi))
    organ = _ellipsoid(grid, organ_center, organ_radii, angle) & body
    organ = _ensure_voxel(organ, organ_center, body)

    label = np.zeros(shape, dtype=np.uint8)
    label[organ] = ORGAN
    if rng.uniform() < LESION_PROBABILITY:
        direction = rng.normal(size=ndim)
        direction /= np.linalg.norm(direction) or 1.0
        lesion_center = organ_center + _unrotate(
            direction * organ_radii * rng.uniform(0.2, 0.9), angle
        )
        lesion_radii = organ_radii.min() * rng.uniform(0.35, 0.6) * rng.uniform(0.85, 1.15, ndim)
        lesion_radii = lesion_radii * lesion_scale
        lesion = _ellipsoid(grid, lesion_center, lesion_radii) & body
        lesion = _ensure_voxel(lesion, lesion_center, organ)
        label[lesion] = LESION
    return body, label


def _bias_field(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Smooth multiplicative field (about +-20%), like an MR coil's inhomogeneity."""
    exponent = np.zeros(shape)
    for axis_grid in _grid(shape):
        linear, quadratic = rng.uniform(-0.12, 0.12), rng.uniform(-0.08, 0.08)
        exponent = exponent + linear * axis_grid + quadratic * axis_grid**2
    return np.exp(exponent)


def _channel(
    rng: np.random.Generator,
    body: np.ndarray,
    label: np.ndarray,
    contrast: tuple[float, float, float],
) -> np.ndarray:
    """Piecewise-constant tissue, blurred edges (partial volume), bias, scale and noise."""
    tissue = np.zeros(label.shape, dtype=np.float64)
    tissue[body] = contrast[0]
    tissue[label == ORGAN] = contrast[1]
    tissue[label == LESION] = contrast[2]
    tissue = gaussian_filter(tissue, sigma=0.6)
    scale = rng.uniform(0.8, 1.25)  # scanner gain differs per case; z-scoring removes it
    image = tissue * _bias_field(rng, label.shape) * scale
    image += rng.normal(0.0, NOISE_STD * scale, label.shape)
    image = np.where(body, np.maximum(image, 1.0), 0.0)
    return image.astype(np.float32)


def make_phantom(
    rng: np.random.Generator, shape: tuple[int, ...], channels: int, lesion_scale: float = 1.0
) -> Phantom:
    """Draw one case of ``shape`` (2-D or 3-D) with ``channels`` co-registered channels; a
    ``lesion_scale`` above 1 grows the lesion (a tiny one needs a longer schedule to be learned)."""
    body, label = _label_map(rng, shape, lesion_scale)
    images = np.stack([_channel(rng, body, label, _contrast(rng, c)) for c in range(channels)])
    return Phantom(images=images, label=label)


def _contrast(rng: np.random.Generator, channel: int) -> tuple[float, float, float]:
    if channel < len(CONTRASTS):
        return CONTRASTS[channel]
    low, high = sorted(rng.uniform(40.0, 200.0, 2))
    return (float(rng.uniform(60.0, 140.0)), float(high), float(low))
