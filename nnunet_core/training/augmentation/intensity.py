"""Intensity augmentations, in place on float32 (c, *spatial) numpy arrays; image only, never seg.

Each function applies its transform unconditionally; the pipeline draws whether it runs at all.
Parameter ranges and per-channel probabilities are upstream nnU-Net's (``get_training_transforms``,
batchgeneratorsv2). Randomness comes only from the ``rng`` argument.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.nn.functional import interpolate

Range = tuple[float, float]
EPS = 1e-7  # upstream's guard against a zero range / std in the gamma transform


def bg_contrast(rng: np.random.Generator, value_range: Range) -> float:
    """Upstream's BGContrast: with p=0.5 a factor from U(lo, 1), else from U(max(lo, 1), hi)."""
    lo, hi = value_range
    if rng.random() < 0.5 and lo < 1:
        return float(rng.uniform(lo, 1))
    return float(rng.uniform(max(lo, 1), hi))


def gaussian_noise(data: np.ndarray, rng: np.random.Generator, std_range: Range = (0, 0.1)) -> None:
    """Add N(0, sigma) noise, sigma ~ U(0, 0.1) shared by all channels.

    Upstream calls the range ``noise_variance`` but uses the value as the standard deviation.
    """
    sigma = rng.uniform(*std_range)
    # torch's normal sampler is ~2x numpy's; its generator is seeded from rng, never global
    generator = torch.Generator().manual_seed(int(rng.integers(2**63)))
    noise = torch.randn(data.shape, generator=generator, dtype=torch.float32)
    torch.from_numpy(data).add_(noise, alpha=sigma)


def gaussian_blur(
    data: np.ndarray,
    rng: np.random.Generator,
    sigma_range: Range = (0.5, 1.0),
    p_per_channel: float = 0.5,
) -> None:
    """Separable Gaussian blur; each channel with p=0.5, its own sigma ~ U(0.5, 1) per axis."""
    chosen = [c for c in range(data.shape[0]) if rng.random() < p_per_channel]
    for c in chosen:
        for axis in range(data.ndim - 1):
            kernel = gaussian_kernel(rng.uniform(*sigma_range))
            data[c] = _correlate_axis(data[c], kernel, axis)


def _correlate_axis(x: np.ndarray, kernel: np.ndarray, axis: int) -> np.ndarray:
    """1D correlation along ``axis`` with reflect padding (upstream pads with torch 'reflect').

    Summing shifted slabs of a padded copy: contiguous passes, 2-6x faster than
    scipy.ndimage.correlate1d on the outer axes of a volume.
    """
    half = len(kernel) // 2
    pad = [(0, 0)] * x.ndim
    pad[axis] = (half, half)
    padded = np.pad(x, pad, mode="reflect")
    n = x.shape[axis]

    def shifted(i: int) -> np.ndarray:
        return padded[(slice(None),) * axis + (slice(i, i + n),)]

    out = np.multiply(shifted(0), kernel[0])
    tmp = np.empty_like(out)
    for i in range(1, len(kernel)):
        np.multiply(shifted(i), kernel[i], out=tmp)
        out += tmp
    return out


def gaussian_kernel(sigma: float, truncate: float = 6.0) -> np.ndarray:
    """Normalized 1D kernel of upstream's size: sigma * 6 + 0.5 rounded to the nearest odd."""
    target = sigma * truncate + 0.5
    size = round(target)
    if size % 2 == 0:
        size = size + 1 if target - size >= 0 else size - 1
    x = np.linspace(-(size - 1) / 2, (size - 1) / 2, size)
    pdf = np.exp(-0.5 * (x / sigma) ** 2)
    return (pdf / pdf.sum()).astype(np.float32)


def multiplicative_brightness(
    data: np.ndarray, rng: np.random.Generator, multiplier_range: Range = (0.75, 1.25)
) -> None:
    """Scale each channel by its own BGContrast((0.75, 1.25)) factor."""
    for c in range(data.shape[0]):
        data[c] *= np.float32(bg_contrast(rng, multiplier_range))


def contrast(
    data: np.ndarray,
    rng: np.random.Generator,
    factor_range: Range = (0.75, 1.25),
    preserve_range: bool = True,
) -> None:
    """Stretch each channel around its mean by BGContrast((0.75, 1.25)); keep its old min/max."""
    for c in range(data.shape[0]):
        factor = bg_contrast(rng, factor_range)
        x = data[c]
        mean = x.mean()
        lo, hi = x.min(), x.max()
        x -= mean
        x *= np.float32(factor)
        x += mean
        if preserve_range:
            np.clip(x, lo, hi, out=x)


def simulate_low_resolution(
    data: np.ndarray,
    rng: np.random.Generator,
    scale_range: Range = (0.5, 1.0),
    p_per_channel: float = 0.5,
    ignore_axes: Sequence[int] = (),
) -> None:
    """Per channel with p=0.5: nearest-exact down to U(0.5, 1) of the size (one factor for all
    axes but ``ignore_axes``), then (bi/tri)linear back up, as upstream."""
    shape = data.shape[1:]
    mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(shape)]
    for c in range(data.shape[0]):
        if rng.random() >= p_per_channel:
            continue
        factor = rng.uniform(*scale_range)
        small = [
            s if axis in ignore_axes else max(1, round(s * factor)) for axis, s in enumerate(shape)
        ]
        x = torch.from_numpy(data[c])[None, None]
        low = interpolate(x, small, mode="nearest-exact")
        data[c] = interpolate(low, list(shape), mode=mode)[0, 0].numpy()


def gamma(
    data: np.ndarray,
    rng: np.random.Generator,
    gamma_range: Range = (0.7, 1.5),
    invert: bool = False,
    retain_stats: bool = True,
) -> None:
    """Per channel: rescale to [0, 1], raise to BGContrast((0.7, 1.5)), rescale back; optionally on
    the inverted image; then restore the channel's mean and (unbiased) std as upstream.

    numpy, not torch: torch.std_mean is several times slower than numpy's mean and std here.
    """
    for c in range(data.shape[0]):
        g = np.float32(bg_contrast(rng, gamma_range))
        x = data[c]
        if invert:
            np.negative(x, out=x)
        if retain_stats:
            mean, std = x.mean(), x.std(ddof=1)
        lo, hi = x.min(), x.max()
        span = hi - lo
        x -= lo
        x /= max(span, np.float32(EPS))
        np.power(x, g, out=x)
        x *= span
        x += lo
        if retain_stats:
            x -= x.mean()
            x *= std / max(x.std(ddof=1), np.float32(EPS))
            x += mean
        if invert:
            np.negative(x, out=x)
