"""Real-size phantoms: a CT-like abdomen (int16 Hounsfield units) and an MR-like head (int16).

Every value is drawn from the ``rng`` passed in, so a seed fixes every voxel. Sizes are given in
millimetres and turned into voxels with the case's spacing, so anatomy keeps its physical size
whatever the slice count or pixel size. Big masks are computed once in-plane and broadcast over
the slices; small structures only inside their bounding box, which keeps a 512 x 512 x 100 case
to well under a second of numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from nnunet_core.dataset.shapes import LESION, ORGAN

HU_MIN, HU_MAX = -1024, 3071  # the range a 12-bit CT scanner stores


@dataclass(frozen=True)
class Volume:
    """One case: the image (int16, numpy order z, y, x) and its labels (uint8)."""

    image: np.ndarray
    label: np.ndarray


def _ellipsoid(
    shape: tuple[int, ...],
    center: np.ndarray,
    radii: np.ndarray,
    angle: float = 0.0,
    wobble: tuple[float, int, float] = (0.0, 0, 0.0),
) -> tuple[tuple[slice, ...], np.ndarray]:
    """The bounding box (slices) of an ellipsoid in voxel units and, inside the box, its squared
    relative radius ``q`` (``q < 1`` inside; ``q < f**2`` the same shape shrunk by ``f``).

    ``angle`` rotates it in-plane (the last two axes); ``wobble`` (amplitude, lobes, phase) makes
    its in-plane rim wavy, as organ outlines are. The box is clipped to the image (possibly empty).
    """
    reach = np.asarray(radii, dtype=np.float64) * (1.0 + abs(wobble[0]))
    if angle:
        reach[-2:] = reach[-2:].max()
    low = [max(0, math.floor(c - r)) for c, r in zip(center, reach, strict=True)]
    high = [min(n, math.ceil(c + r) + 1) for n, c, r in zip(shape, center, reach, strict=True)]
    box = tuple(slice(lo, max(lo, hi)) for lo, hi in zip(low, high, strict=True))
    grids = np.ogrid[box]
    offsets = [(g - np.float32(c)).astype(np.float32) for g, c in zip(grids, center, strict=True)]
    cos, sin = np.float32(math.cos(angle)), np.float32(math.sin(angle))
    a, b = offsets[-2], offsets[-1]
    offsets[-2], offsets[-1] = cos * a - sin * b, sin * a + cos * b
    q = sum((o / np.float32(r)) ** 2 for o, r in zip(offsets, radii, strict=True))
    amplitude, lobes, phase = wobble
    if amplitude:
        theta = np.arctan2(offsets[-2], offsets[-1])
        q = q / ((1.0 + amplitude * np.sin(lobes * theta + phase)) ** 2).astype(np.float32)
    return box, np.broadcast_to(q, tuple(s.stop - s.start for s in box))


def _inside(*args, **kwargs) -> tuple[tuple[slice, ...], np.ndarray]:
    """The ellipsoid's box and mask (``_ellipsoid``'s arguments)."""
    box, q = _ellipsoid(*args, **kwargs)
    return box, q < 1.0


def _paint(
    image: np.ndarray,
    box: tuple[slice, ...],
    mask: np.ndarray,
    value: float,
    where: np.ndarray | None = None,
) -> np.ndarray:
    """Set the voxels of ``mask`` in ``image[box]`` (only where ``where[box]``) to ``value``;
    return the mask used."""
    if where is not None:
        mask = mask & where[box]
    image[box][mask] = value
    return mask


def _noisy_int16(
    image: np.ndarray, rng: np.random.Generator, sigma: float, magnitude: bool = False
) -> np.ndarray:
    """Add Gaussian noise in place (float32, one draw per voxel) and store as int16; with
    ``magnitude``, keep its absolute value, as an MR magnitude image does (a noisy, non-zero
    background)."""
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(sigma)
    if magnitude:
        np.abs(image, out=image)
    np.rint(image, out=image)
    np.clip(image, HU_MIN, HU_MAX, out=image)
    return image.astype(np.int16)


def ct_abdomen(
    rng: np.random.Generator, shape: tuple[int, int, int], spacing: tuple[float, float, float]
) -> Volume:
    """An abdominal CT slab: air (-1000) around an elliptic body with a subcutaneous fat layer
    (~-100), soft tissue (~40), a vertebral column (cancellous ~700, cortex ~1000, discs ~80), a
    contrast-filled aorta, an unlabelled spleen (~50), the liver-like organ (label 1, ~60) and a
    lesion in it (label 2, ~25), with scanner noise (sigma 10-16 HU)."""
    n, ny, nx = shape
    sz, sy, sx = spacing
    mm = np.array([sz, sy, sx])
    y = np.arange(ny, dtype=np.float32)[:, None]
    x = np.arange(nx, dtype=np.float32)[None, :]
    cy, cx = ny / 2 + rng.uniform(-10, 10), nx / 2 + rng.uniform(-10, 10)
    ry, rx = rng.uniform(105, 125) / sy, rng.uniform(150, 168) / sx  # a 22 x 32 cm abdomen
    rho = ((y - np.float32(cy)) / np.float32(ry)) ** 2 + (
        (x - np.float32(cx)) / np.float32(rx)
    ) ** 2
    # the outline widens and narrows slowly along the body axis
    z = np.arange(n) * sz
    scale = 1.0 + 0.05 * np.sin(z / rng.uniform(120, 220) + rng.uniform(0, 2 * np.pi))
    scale2 = (scale**2).astype(np.float32)[:, None, None]
    body = rho[None] <= scale2
    inner = rho[None] <= scale2 * np.float32(rng.uniform(0.84, 0.9) ** 2)
    image = np.where(inner, np.float32(40.0), np.where(body, np.float32(-100.0), -1000.0))
    image = image.astype(np.float32, copy=False)
    del body
    label = np.zeros(shape, np.uint8)

    # vertebral column: cancellous core, cortical rim, an intervertebral disc every ~3 cm
    box, q = _ellipsoid(
        shape, np.array([n / 2, cy + 0.62 * ry, cx]), np.array([10 * n, 15 / sy, 19 / sx])
    )
    column, cortex = q < 1.0, (q < 1.0) & (q >= 0.8**2)
    slices = np.arange(box[0].start, box[0].stop) * sz
    disc = (((slices + rng.uniform(0, 30)) % 30) < 5)[:, None, None]
    _paint(image, box, cortex & ~disc, 1000.0)
    _paint(image, box, column & ~cortex & ~disc, 700.0)
    _paint(image, box, column & disc, 80.0)
    # aorta, in front of the spine (contrast-enhanced)
    aorta = np.array([n / 2, cy + 0.35 * ry, cx + 8 / sx])
    _paint(image, *_inside(shape, aorta, np.array([10 * n, 11 / sy, 11 / sx])), 170.0)
    # spleen: as dense as the organ's neighbours, never labelled, on the other side
    spleen_c = np.array([n * rng.uniform(0.35, 0.55), cy - 0.05 * ry, cx + 0.6 * rx])
    spleen = _inside(shape, spleen_c, np.array([45, 40, 28]) / mm, rng.uniform(-0.4, 0.4))
    _paint(image, *spleen, 50.0 + rng.uniform(-4, 4), where=inner)

    # the organ (liver-like) and its lesion, both kept inside the soft tissue
    radii = np.array([rng.uniform(55, 75), rng.uniform(60, 75), rng.uniform(75, 95)]) / mm
    radii[0] = min(radii[0], 0.42 * n)
    organ_c = np.array(
        [n / 2 + rng.uniform(-0.1, 0.1) * n, cy - 0.15 * ry, cx - 0.42 * rx + rng.uniform(-8, 8)]
    )
    wobble = (rng.uniform(0.04, 0.1), 3, rng.uniform(0, 6.3))
    box, organ = _inside(shape, organ_c, radii, rng.uniform(-0.4, 0.4), wobble)
    organ = _paint(image, box, organ, 60.0 + rng.uniform(-5, 5), where=inner)
    label[box][organ] = ORGAN
    lesion_r = np.full(3, rng.uniform(8, 18)) / mm
    lesion_r[0] = min(lesion_r[0], max(1.5, 0.25 * n))
    lesion_wobble = (0.1, 5, rng.uniform(0, 6.3))
    for lesion_c in (organ_c + rng.uniform(-0.35, 0.35, 3) * radii, organ_c):
        lbox, lesion = _inside(shape, lesion_c, lesion_r, 0.0, lesion_wobble)
        lesion = lesion & (label[lbox] == ORGAN)
        if lesion.any():  # else the organ's edge was cut by the body: use its centre
            break
    _paint(image, lbox, lesion, 25.0 + rng.uniform(-5, 5))
    label[lbox][lesion] = LESION
    return Volume(_noisy_int16(image, rng, rng.uniform(10, 16)), label)


def mr_head(
    rng: np.random.Generator, shape: tuple[int, int, int], spacing: tuple[float, float, float]
) -> Volume:
    """A T1-like head filling the field of view as a scanner stores it: magnitude noise in the
    background (so cropping keeps the whole volume), scalp fat (~800), a dark skull (~120), CSF
    (~150) around a brain with grey (~600) and white matter (~850), the neck below, the lateral
    ventricles (label 1) and a lesion in the white matter (~450, label 2), under a smooth bias
    field."""
    mm = np.asarray(spacing)
    center = np.asarray(shape) / 2 + rng.uniform(-4, 4, 3) / mm
    center[0] += 12 / mm[0]  # the head sits high; the neck fills the bottom slices
    radii = np.array([rng.uniform(58, 66), rng.uniform(80, 88), rng.uniform(64, 72)]) / mm
    angle = rng.uniform(-0.1, 0.1)
    image = np.zeros(shape, np.float32)
    label = np.zeros(shape, np.uint8)
    # the neck: an elliptic column from the bottom slice up into the head
    y = np.arange(shape[1], dtype=np.float32)[:, None] - np.float32(center[1] + 15 / mm[1])
    x = np.arange(shape[2], dtype=np.float32)[None, :] - np.float32(center[2])
    neck = (y * mm[1] / 48) ** 2 + (x * mm[2] / 55) ** 2 < 1.0
    image[: int(center[0])][:, neck] = 500.0
    # scalp, skull and CSF as shells around the brain, then the brain itself
    for extra_mm, value in ((14, 800.0), (9, 120.0), (3, 150.0)):
        _paint(image, *_inside(shape, center, radii + extra_mm / mm, angle), value)
    box, q = _ellipsoid(shape, center, radii, angle)
    _paint(image, box, q < 1.0, 600.0)
    _paint(image, box, q < 0.88**2, 850.0)
    # the interhemispheric fissure (CSF) through the upper half
    z = np.arange(box[0].start, box[0].stop)[:, None, None]
    x = np.arange(box[2].start, box[2].stop)[None, None, :]
    fissure = (q < 1.0) & (z >= center[0]) & (np.abs(x - center[2]) * mm[2] < 1.5)
    _paint(image, box, fissure, 150.0)
    # two lateral ventricles either side of the midline
    for side in (-1, 1):
        vent_c = center + np.array([8, -6, side * 9]) / mm
        vent_r = np.array([rng.uniform(11, 14), rng.uniform(22, 28), rng.uniform(6, 8)]) / mm
        vbox, vent = _inside(shape, vent_c, vent_r, side * 0.15, (0.1, 3, rng.uniform(0, 6)))
        _paint(image, vbox, vent, 150.0)
        label[vbox][vent] = ORGAN
    # lesion: in the white matter of one hemisphere, away from the ventricles
    side = rng.choice((-1, 1))
    lesion_c = center + np.array([rng.uniform(-5, 20), rng.uniform(-30, 30), side * 38]) / mm
    lesion_r = np.full(3, rng.uniform(8, 16)) / mm
    lbox, lesion = _inside(shape, lesion_c, lesion_r, 0.0, (0.1, 5, rng.uniform(0, 6)))
    lesion = lesion & (image[lbox] >= 600) & (label[lbox] == 0)  # in the brain
    _paint(image, lbox, lesion, 450.0)
    label[lbox][lesion] = LESION
    # a smooth multiplicative bias field (coil sensitivity), then magnitude noise everywhere
    grids = [np.linspace(-1, 1, n, dtype=np.float32) for n in shape]
    gains = rng.uniform(-0.08, 0.08, 3).astype(np.float32)
    image *= 1.0 + (
        gains[0] * grids[0][:, None, None]
        + gains[1] * grids[1][None, :, None]
        + gains[2] * grids[2][None, None, :]
    )
    return Volume(_noisy_int16(image, rng, rng.uniform(15, 25), magnitude=True), label)
