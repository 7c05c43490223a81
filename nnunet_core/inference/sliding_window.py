"""Sliding-window prediction of a whole preprocessed case, as upstream's ``nnUNetPredictor`` does.

The case is padded (constant 0, centred) to at least the patch size, covered by overlapping tiles
placed like upstream's ``compute_steps_for_sliding_window``, and each tile's logits are weighted
with a Gaussian importance map (sigma = tile/8, max 10, no zeros) before they are summed; the sum
is divided by the summed weights. Mirroring test-time augmentation averages the network over every
combination of the allowed axes. 2-D configurations predict a ``(c, z, y, x)`` case slice by slice.

One deliberate difference: upstream accumulates in float16; we accumulate in float32 (the same
memory order of magnitude, no overflow check needed, and fold averages that do not lose digits).
Upstream's float16 loses up to ~0.5 of a logit where the Gaussian weight is tiny (tile corners),
so its probabilities can be matched only by doing the same: ``accumulate=torch.float16`` repeats
upstream's arithmetic step by step (float16 Gaussian, float16 sums, float16 division), giving its
logits bit for bit (``predict --fp16_accumulation``), on CUDA too, where upstream keeps the
network's autocast float16 output as it is (``pass_dtype``).

The case and the sums live on the device (or on the CPU with ``on_device=False``, upstream's
``--not_on_device``); a device that runs out of memory gets them moved to the CPU and the case
predicted again, after the failed attempt's memory is freed (``device_fallback``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from functools import lru_cache

import numpy as np
import torch
from scipy.ndimage import gaussian_filter1d
from tqdm import tqdm

from nnunet_core.errors import ConfigurationError
from nnunet_core.inference.device_fallback import on_device_or_cpu, results_device
from nnunet_core.runtime.case_progress import wants_bar
from nnunet_core.runtime.heap import keep_freed_memory

SIGMA_SCALE = 1.0 / 8
VALUE_SCALING_FACTOR = 10.0


def compute_steps(
    image_size: Sequence[int], tile_size: Sequence[int], step_size: float
) -> list[list[int]]:
    """Tile start positions per axis: ``ceil((size - tile) / (tile * step)) + 1`` evenly spaced
    steps.

    The first tile starts at 0 and the last ends at the image border; the actual step is at most
    ``tile * step_size`` voxels (upstream's rounding: round-half-to-even of ``i * actual_step``).
    """
    if not 0 < step_size <= 1:
        msg = f"tile step size must be in (0, 1], got {step_size}"
        raise ConfigurationError(msg)
    if len(image_size) != len(tile_size) or any(
        i < t for i, t in zip(image_size, tile_size, strict=True)
    ):
        msg = (
            f"image size {tuple(image_size)} must be at least the tile size {tuple(tile_size)} "
            "(pad first)"
        )
        raise ConfigurationError(msg)
    steps = []
    for size, tile in zip(image_size, tile_size, strict=True):
        num = int(math.ceil((size - tile) / (tile * step_size))) + 1
        actual = (size - tile) / (num - 1) if num > 1 else 0.0
        steps.append([int(round(actual * i)) for i in range(num)])
    return steps


@lru_cache(maxsize=4)
def _gaussian_float64(
    tile_size: tuple[int, ...], sigma_scale: float, value_scaling: float
) -> np.ndarray:
    # a delta at the tile centre (index size // 2) blurred with a truncated, constant-mode Gaussian;
    # the filter is separable, so the map is the outer product of the blurred 1-D deltas
    profiles = []
    for size in tile_size:
        delta = np.zeros(size)
        delta[size // 2] = 1.0
        profiles.append(gaussian_filter1d(delta, size * sigma_scale, mode="constant", cval=0.0))
    gaussian = profiles[0]
    for profile in profiles[1:]:
        gaussian = np.multiply.outer(gaussian, profile)
    gaussian = gaussian / (gaussian.max() / value_scaling)
    gaussian.setflags(write=False)
    return gaussian


def gaussian_importance_map(
    tile_size: Sequence[int],
    sigma_scale: float = SIGMA_SCALE,
    value_scaling_factor: float = VALUE_SCALING_FACTOR,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Weights of one tile in ``dtype``: peak ``value_scaling_factor`` at the centre, no zeros
    (a zero weight could leave voxels with weight sum 0, NaN after dividing; in float16 the
    corners underflow to 0 and get the smallest nonzero weight, as upstream)."""
    array = _gaussian_float64(tuple(int(t) for t in tile_size), sigma_scale, value_scaling_factor)
    gaussian = torch.from_numpy(array.copy()).to(dtype)
    zero = gaussian == 0
    if zero.any():
        gaussian[zero] = gaussian[~zero].min()
    return gaussian.to(device)


def pad_to_patch(
    data: torch.Tensor, patch_size: Sequence[int]
) -> tuple[torch.Tensor, tuple[slice, ...]]:
    """Pad the last ``len(patch_size)`` axes with zeros to at least the patch, content centred.

    An odd amount puts the extra voxel after the content, as upstream's ``pad_nd_image``.
    Returns the padded tensor and the slicer (all axes) that crops it back.
    """
    lead = data.ndim - len(patch_size)
    pads: list[tuple[int, int]] = [(0, 0)] * lead
    for size, patch in zip(data.shape[lead:], patch_size, strict=True):
        missing = max(0, int(patch) - size)
        pads.append((missing // 2, missing - missing // 2))
    revert = tuple(slice(lo, lo + size) for (lo, _), size in zip(pads, data.shape, strict=True))
    if not any(lo or hi for lo, hi in pads):
        return data, revert
    flat = [p for lo_hi in reversed(pads) for p in lo_hi]  # torch wants the last axis first
    return torch.nn.functional.pad(data, flat, mode="constant", value=0.0), revert


def tile_slicers(
    spatial_shape: Sequence[int], patch_size: Sequence[int], step_size: float
) -> list[tuple[int | slice, ...]]:
    """Spatial indices of every tile; with a 2-D patch on 3-D data, one slice index comes first."""
    spatial_shape = tuple(int(s) for s in spatial_shape)
    extra = len(spatial_shape) - len(patch_size)
    if extra not in (0, 1):
        msg = f"patch {tuple(patch_size)} does not fit data with spatial shape {spatial_shape}"
        raise ConfigurationError(msg)
    steps = compute_steps(spatial_shape[extra:], patch_size, step_size)
    leading: list[tuple[int, ...]] = [(z,) for z in range(spatial_shape[0])] if extra else [()]
    slicers: list[tuple[int | slice, ...]] = []
    for lead in leading:
        for starts in itertools.product(*steps):
            tile = tuple(slice(s, s + int(p)) for s, p in zip(starts, patch_size, strict=True))
            slicers.append((*lead, *tile))
    return slicers


def _forward(network: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = network(x)
    if isinstance(out, (list, tuple)):  # deep supervision: the full-resolution output comes first
        out = out[0]
    return out


def pass_dtype(device: torch.device, accumulate: torch.dtype) -> torch.dtype | None:
    """The dtype each network pass on ``device`` is turned into before the mirror sum and the
    Gaussian product; None keeps the network's own.

    Upstream never converts. On CUDA it runs under autocast, so with float16 sums its float16
    output, the mirror sum, its division and the product with the float16 Gaussian all stay
    float16: None repeats that. On the CPU (no autocast) the output is float32 already and
    upstream's products are float32 too; float32 sums take float32 passes everywhere.
    """
    if device.type == "cuda" and accumulate == torch.float16:
        return None
    return torch.float32


def mirror_and_predict(
    network: torch.nn.Module,
    x: torch.Tensor,
    mirror_axes: Sequence[int] | None,
    dtype: torch.dtype | None = torch.float32,
) -> torch.Tensor:
    """Network output on ``x`` (b, c, *patch), averaged over every flip combination of
    ``mirror_axes``, each pass in ``dtype`` (None: as the network gives it, see ``pass_dtype``).

    ``mirror_axes`` count spatial axes of the patch (0 is the first spatial axis).
    """

    def as_dtype(t: torch.Tensor) -> torch.Tensor:
        return t if dtype is None else t.to(dtype)

    prediction = as_dtype(_forward(network, x))
    if not mirror_axes:
        return prediction
    if max(mirror_axes) >= x.ndim - 2 or min(mirror_axes) < 0:
        msg = f"mirror axes {tuple(mirror_axes)} do not fit a {x.ndim - 2}-D patch"
        raise ConfigurationError(msg)
    axes = [a + 2 for a in mirror_axes]
    combinations = [c for n in range(1, len(axes) + 1) for c in itertools.combinations(axes, n)]
    for flip in combinations:
        # out of place: a network may hand back its input (or a buffer it keeps)
        prediction = prediction + as_dtype(torch.flip(_forward(network, torch.flip(x, flip)), flip))
    return prediction / (len(combinations) + 1)


def _batches(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _on_results_device(
    data: torch.Tensor, gaussian: torch.Tensor, num_outputs: int, results: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The case, the tile weights and the two sums (in the weights' dtype) on ``results``: what an
    attempt holds there, and lets go of when it fails."""
    data = data.to(results)
    logits = torch.zeros((num_outputs, *data.shape[1:]), dtype=gaussian.dtype, device=results)
    weights = torch.zeros(data.shape[1:], dtype=gaussian.dtype, device=results)
    return data, gaussian.to(results), logits, weights


def _add_tile(
    logits: torch.Tensor,
    weights: torch.Tensor,
    tile_logits: torch.Tensor,
    weight: torch.Tensor,
    tile: tuple[int | slice, ...],
) -> None:
    """Add one tile's weighted logits and its weights to the sums."""
    # upstream's steps: the product (float16 from a float16 pass), then the rounded sum
    if logits.dtype == torch.float16:
        logits[(slice(None), *tile)] += tile_logits * weight
    else:  # in place: no (classes, *patch) temporary per tile (half the CPU time)
        logits[(slice(None), *tile)].addcmul_(tile_logits, weight)
    weights[tile] += weight


def _accumulate(
    network: torch.nn.Module,
    data: torch.Tensor,
    slicers: list[tuple[int | slice, ...]],
    patch_size: Sequence[int],
    num_outputs: int,
    gaussian: torch.Tensor,  # the tile weights (ones without the Gaussian), in the sums' dtype
    mirror_axes: Sequence[int] | None,
    device: torch.device,
    results_device: torch.device,
    batch_tiles: int,
    progress: bool,
    passes: torch.dtype | None,  # pass_dtype(device, the sums' dtype)
) -> torch.Tensor:
    data, weight, logits, weights = _on_results_device(data, gaussian, num_outputs, results_device)
    autocast = torch.autocast("cuda") if device.type == "cuda" else nullcontext()
    expected = (num_outputs, *(int(p) for p in patch_size))
    # a bar into a log file is carriage-return garbage: only in a terminal
    bar = tqdm(
        total=len(slicers), disable=not (progress and wants_bar(None)), desc="sliding window"
    )
    with bar, autocast, torch.no_grad():
        for batch in _batches(slicers, batch_tiles):
            x = torch.stack([data[(slice(None), *s)] for s in batch]).to(device)
            with torch.inference_mode():
                prediction = mirror_and_predict(network, x, mirror_axes, passes)
                prediction = prediction.to(results_device)
            if tuple(prediction.shape[1:]) != expected:
                msg = (
                    f"network output {tuple(prediction.shape[1:])} per tile; expected {expected} "
                    "(num_outputs, *patch)"
                )
                raise ConfigurationError(msg)
            for tile_logits, s in zip(prediction, batch, strict=True):
                _add_tile(logits, weights, tile_logits, weight, s)
            bar.update(len(batch))
    logits /= weights
    return logits


def sliding_window_logits(
    network: torch.nn.Module,
    data: torch.Tensor,
    patch_size: Sequence[int],
    num_outputs: int,
    step_size: float = 0.5,
    use_gaussian: bool = True,
    mirror_axes: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    batch_tiles: int = 1,
    progress: bool = False,
    accumulate: torch.dtype = torch.float32,
    on_device: bool = True,
) -> torch.Tensor:
    """Logits ``(num_outputs, *spatial)`` (``accumulate``'s dtype, on the CPU) of a whole
    ``(c, *spatial)`` case.

    ``patch_size`` has one axis fewer than ``spatial`` for 2-D configurations: the case is then
    predicted slice by slice along the first spatial axis. The case and the accumulators live on
    ``device`` (on the CPU when not ``on_device``); if the device runs out of memory they move to
    the CPU and the prediction is repeated (as upstream), the network still on ``device``.
    """
    if data.ndim - 1 - len(patch_size) not in (0, 1):
        msg = (
            f"data of shape {tuple(data.shape)} (c, *spatial) does not fit patch size "
            f"{tuple(patch_size)}"
        )
        raise ConfigurationError(msg)
    if batch_tiles < 1:
        msg = f"batch_tiles must be >= 1, got {batch_tiles}"
        raise ConfigurationError(msg)
    device = torch.device(device)
    if device.type == "cpu":
        keep_freed_memory()  # the forward pass reuses its activations' memory tile after tile
    network = network.to(device).eval()
    padded, revert = pad_to_patch(data.float(), patch_size)
    slicers = tile_slicers(padded.shape[1:], patch_size, step_size)
    weights_of_a_tile = gaussian_importance_map(patch_size, dtype=accumulate)
    gaussian = weights_of_a_tile if use_gaussian else torch.ones_like(weights_of_a_tile)
    passes = pass_dtype(device, accumulate)

    def attempt(results: torch.device) -> torch.Tensor:  # holds nothing on the device itself
        return _accumulate(
            network, padded, slicers, patch_size, num_outputs, gaussian, mirror_axes, device,
            results, batch_tiles, progress, passes,
        )  # fmt: skip

    logits = on_device_or_cpu(attempt, results_device(device, on_device))
    return logits[(slice(None), *revert[1:])].cpu()


def predict_logits_from_folds(
    networks: Sequence[torch.nn.Module],
    data: torch.Tensor,
    patch_size: Sequence[int],
    num_outputs: int,
    step_size: float = 0.5,
    use_gaussian: bool = True,
    mirror_axes: Sequence[int] | None = None,
    device: torch.device | str = "cpu",
    batch_tiles: int = 1,
    progress: bool = False,
    accumulate: torch.dtype = torch.float32,
    on_device: bool = True,
) -> torch.Tensor:
    """Mean of the fold networks' logits (upstream averages logits, not probabilities)."""
    if not networks:
        msg = "predict_logits_from_folds needs at least one network (no folds given)"
        raise ConfigurationError(msg)
    total: torch.Tensor | None = None
    for network in networks:
        logits = sliding_window_logits(
            network,
            data,
            patch_size,
            num_outputs,
            step_size,
            use_gaussian,
            mirror_axes,
            device,
            batch_tiles,
            progress,
            accumulate,
            on_device,
        )
        total = logits if total is None else total.add_(logits)
        del logits
    assert total is not None
    return total if len(networks) == 1 else total / len(networks)
