"""nnU-Net's training augmentation: its configuration from the patch size, and the per-sample
pipeline.

``configure_augmentation`` reproduces upstream's
``configure_rotation_dummyDA_mirroring_and_inital_patch_size`` (including ``get_patch_size`` for the
larger patch the loader crops); ``training_transforms`` builds the per-sample callable with
upstream's order and probabilities. Callables are plain classes so that loader worker processes can
pickle them. With ``cascade_labels`` (a cascade stage's foreground labels) both pipelines end with
upstream's cascade steps (``cascade``): seg channel 1, the previous stage, becomes one-hot input.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nnunet_core.training.augmentation import intensity
from nnunet_core.training.augmentation.cascade import CascadeTraining, CascadeValidation
from nnunet_core.training.augmentation.mirror import draw_mirror_axes, mirror
from nnunet_core.training.augmentation.spatial import PAD_SEG, Box, Range, SpatialTransform

# (lower, size) of a box of the initial patch -> (data, seg) of that box
RegionReader = Callable[[Sequence[int], Sequence[int]], tuple[np.ndarray, np.ndarray]]

ANISO_THRESHOLD = 3  # upstream: dummy 2D when max(patch) / patch[0] > 3
INITIAL_PATCH_SCALE_RANGE = (
    0.85,
    1.25,
)  # upstream passes this to get_patch_size (not the DA range)

# Upstream's RandomTransform apply probabilities, in pipeline order.
P_NOISE = 0.1  # GaussianNoise, std ~ U(0, 0.1), shared by channels
P_BLUR = 0.2  # GaussianBlur, sigma ~ U(0.5, 1) per axis, p_per_channel 0.5
P_BRIGHTNESS = 0.15  # MultiplicativeBrightness, BGContrast((0.75, 1.25)) per channel
P_CONTRAST = 0.15  # Contrast, BGContrast((0.75, 1.25)), preserve_range
P_LOW_RES = 0.25  # SimulateLowResolution, scale U(0.5, 1), p_per_channel 0.5
P_GAMMA_INVERTED = 0.1  # Gamma BGContrast((0.7, 1.5)) on the inverted image, retain stats
P_GAMMA = 0.3  # Gamma BGContrast((0.7, 1.5)), retain stats


@dataclass(frozen=True)
class AugmentationConfig:
    """What upstream derives from the patch size before training."""

    rotation: tuple[float, float]  # radians, the same range for every rotated axis
    do_dummy_2d: bool
    initial_patch_size: tuple[int, ...]  # what the loader crops before the spatial transform
    mirror_axes: tuple[int, ...]  # also the inference mirroring axes


def configure_augmentation(
    patch_size: Sequence[int], allow_dummy_2d: bool = True
) -> AugmentationConfig:
    """Rotation range, dummy-2D flag, initial patch size and mirror axes, as upstream.

    2D: +-15 deg if max/min(patch) > 1.5, else +-180 deg. 3D: dummy 2D (+-180 deg in-plane) when
    max(patch) / patch[0] > ANISO_THRESHOLD, else +-30 deg. Upstream's rule uses the patch only.
    ``allow_dummy_2d=False`` is upstream's ``nnUNetTrainer_noDummy2DDA`` (always 3D, +-30 deg).
    """
    patch = tuple(int(p) for p in patch_size)
    dim = len(patch)
    if dim == 2:
        dummy_2d = False
        degrees = 15.0 if max(patch) / min(patch) > 1.5 else 180.0
    elif dim == 3:
        dummy_2d = allow_dummy_2d and max(patch) / patch[0] > ANISO_THRESHOLD
        degrees = 180.0 if dummy_2d else 30.0
    else:
        raise ValueError(f"patch size must be 2D or 3D, got {patch}")
    rotation = (-degrees / 360 * 2 * math.pi, degrees / 360 * 2 * math.pi)
    initial = list(initial_patch_size(patch, rotation, INITIAL_PATCH_SCALE_RANGE))
    if dummy_2d:
        initial[0] = patch[0]
    return AugmentationConfig(rotation, dummy_2d, tuple(initial), tuple(range(dim)))


def initial_patch_size(
    patch_size: Sequence[int], rotation: Range, scale_range: Range = INITIAL_PATCH_SCALE_RANGE
) -> tuple[int, ...]:
    """Upstream's get_patch_size: the patch-size vector turned by the largest angle (capped at 90
    deg) about each axis in turn, the elementwise max of |result| and the patch, / min(scale),
    truncated to int."""
    angle = min(max(abs(a) for a in rotation), math.pi / 2)
    vec = np.asarray(patch_size, dtype=np.float64)
    c, s = math.cos(angle), math.sin(angle)
    if len(vec) == 3:
        turns = [
            np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
        ]
    else:
        turns = [np.array([[c, -s], [s, c]])]
    extent = vec.copy()
    for turn in turns:
        extent = np.maximum(extent, np.abs(vec @ turn))  # row vector times matrix, as upstream
    return tuple(int(v) for v in extent / min(scale_range))


class TrainingTransforms:
    """Upstream's training pipeline for one sample: (data, seg, rng) -> (data, seg).

    data (c, *spatial) float, seg (k, *spatial) ints, both the initial (larger) patch; returns the
    final patch as new contiguous arrays (torch tensors when ``data`` was one), seg -1 -> 0.
    With ``cascade_labels`` seg channel 1 (the previous stage) leaves seg and is appended to data
    as one channel per label, then perturbed (``cascade.CascadeTraining``).
    """

    def __init__(
        self,
        patch_size: Sequence[int],
        rotation_ranges: Range | Sequence[Range],
        do_dummy_2d: bool,
        mirror_axes: Sequence[int] | None,
        mask_channels: Sequence[int] = (),
        p_elastic: float = 0.0,
        random_crop: bool = False,
        cascade_labels: Sequence[int] | None = None,
    ) -> None:
        self.spatial = SpatialTransform(
            patch_size,
            rotation=rotation_ranges,
            dummy_2d=do_dummy_2d,
            p_elastic=p_elastic,
            random_crop=random_crop,
        )
        self.low_res_ignore_axes = (0,) if do_dummy_2d else ()
        self.mirror_axes = tuple(mirror_axes or ())
        self.mask_channels = tuple(mask_channels)
        self.cascade = None if cascade_labels is None else CascadeTraining(cascade_labels)

    def __call__(
        self,
        data: np.ndarray | torch.Tensor,
        seg: np.ndarray | torch.Tensor,
        rng: np.random.Generator,
    ) -> tuple[np.ndarray, np.ndarray] | tuple[torch.Tensor, torch.Tensor]:
        as_torch = isinstance(data, torch.Tensor)
        data_np, seg_np = _numpy(data), _numpy(seg)

        def read(lower: Sequence[int], size: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
            box = (slice(None), *(slice(a, a + n) for a, n in zip(lower, size, strict=True)))
            return data_np[box], seg_np[box]

        x, s = self.transform_region(read, data_np.shape[1:], rng)
        return _output(x, s, as_torch)

    def transform_region(
        self,
        read: RegionReader,
        shape: Sequence[int],
        rng: np.random.Generator,
        filled: Box | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The pipeline on an initial patch of spatial ``shape`` that is read lazily:
        ``read(lower, size)`` returns (data, seg) of that box of it (numpy). Only the box the
        drawn spatial transform needs is read (``SpatialTransform.draw``), within ``filled``
        (lower, size) where the rest is padding; the result equals ``self(data, seg, rng)`` on
        the whole initial patch."""
        draw = self.spatial.draw(shape, rng, filled)
        data, seg = read(*draw.region)
        x, s = self.spatial.apply(_float32(data), _signed(seg), draw)  # fresh, safe to modify
        if rng.random() < P_NOISE:
            intensity.gaussian_noise(x, rng)
        if rng.random() < P_BLUR:
            intensity.gaussian_blur(x, rng)
        if rng.random() < P_BRIGHTNESS:
            intensity.multiplicative_brightness(x, rng)
        if rng.random() < P_CONTRAST:
            intensity.contrast(x, rng)
        if rng.random() < P_LOW_RES:
            intensity.simulate_low_resolution(x, rng, ignore_axes=self.low_res_ignore_axes)
        if rng.random() < P_GAMMA_INVERTED:
            intensity.gamma(x, rng, invert=True)
        if rng.random() < P_GAMMA:
            intensity.gamma(x, rng, invert=False)
        flips = draw_mirror_axes(self.mirror_axes, rng)
        if self.mask_channels:
            outside = s[0] < 0  # upstream MaskImageTransform (use_mask_for_norm channels)
            for c in self.mask_channels:
                x[c][outside] = 0
        s[s == PAD_SEG] = 0  # upstream RemoveLabelTansform(-1, 0)
        x, s = mirror(x, s, flips)
        if self.cascade is not None:  # upstream: after RemoveLabel, the cascade's rng draws last
            x, s = self.cascade(x, s, rng)
        return np.ascontiguousarray(x), np.ascontiguousarray(s)


def reads_region(transform: object) -> bool:
    """Whether ``transform`` is our training pipeline whose call goes through
    ``transform_region`` (a subclass that overrides ``__call__`` is called as a whole)."""
    return (
        isinstance(transform, TrainingTransforms)
        and type(transform).__call__ is TrainingTransforms.__call__
    )


class ValidationTransforms:
    """Upstream's validation pipeline for one sample: seg -1 -> 0, then with ``cascade_labels``
    the previous stage's one-hot (rng unused)."""

    def __init__(self, cascade_labels: Sequence[int] | None = None) -> None:
        self.cascade = None if cascade_labels is None else CascadeValidation(cascade_labels)

    def __call__(
        self,
        data: np.ndarray | torch.Tensor,
        seg: np.ndarray | torch.Tensor,
        _rng: np.random.Generator | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | tuple[torch.Tensor, torch.Tensor]:
        as_torch = isinstance(data, torch.Tensor)
        s = _signed(seg).copy()
        s[s == PAD_SEG] = 0
        x = _float32(data)
        if self.cascade is not None:
            x, s = self.cascade(x, s)
        return _output(x, s, as_torch)


def training_transforms(
    patch_size: Sequence[int],
    rotation_ranges: Range | Sequence[Range],
    do_dummy_2d: bool,
    mirror_axes: Sequence[int] | None,
    mask_channels: Sequence[int] = (),
    p_elastic: float = 0.0,
    random_crop: bool = False,
    cascade_labels: Sequence[int] | None = None,
) -> TrainingTransforms:
    """The training pipeline; ``mask_channels`` are the channels with use_mask_for_norm,
    ``cascade_labels`` the foreground labels of a cascade stage (None: not a cascade)."""
    return TrainingTransforms(
        patch_size,
        rotation_ranges,
        do_dummy_2d,
        mirror_axes,
        mask_channels,
        p_elastic,
        random_crop,
        cascade_labels,
    )


def _numpy(array: np.ndarray | torch.Tensor) -> np.ndarray:
    return array.numpy() if isinstance(array, torch.Tensor) else np.asarray(array)


def _float32(data: np.ndarray | torch.Tensor) -> np.ndarray:
    array = _numpy(data)
    return array if array.dtype == np.float32 else array.astype(np.float32)


def _signed(seg: np.ndarray | torch.Tensor) -> np.ndarray:
    """Seg as signed integers, so the -1 padding label fits (int16 unless already signed)."""
    array = _numpy(seg)
    return array if array.dtype.kind == "i" else array.astype(np.int16)


def _output(x: np.ndarray, s: np.ndarray, as_torch: bool):
    return (torch.from_numpy(x), torch.from_numpy(s)) if as_torch else (x, s)
