"""Experiment planning: from a fingerprint to the plans dict (configurations, patch, batch,
network).

Reproduces nnU-Net v2.8.1's ``ExperimentPlanner`` and its ResEnc presets number for number, and
writes the same keys in the same order, so a plans file made here is interchangeable with
upstream's. The VRAM estimate is computed analytically (``feature_map_size``) instead of by
instantiating a torch network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.readers import reader_name
from nnunet_core.planning.feature_map_size import (
    plain_unet_feature_map_size,
    resenc_unet_feature_map_size,
)
from nnunet_core.planning.presets import PlannerPreset, get_preset
from nnunet_core.planning.target_spacing import (
    compute_new_shape,
    fullres_target_spacing,
    transpose_axes,
)
from nnunet_core.planning.topology import DEFAULT_MIN_FEATURE_MAP_SIZE, pool_and_conv_props

NETWORK_MODULE = "dynamic_network_architectures.architectures.unet"
BASE_NUM_FEATURES = 32
MAX_FEATURES = {2: 512, 3: 320}
REFERENCE_BATCH_SIZE = {2: 12, 3: 2}
MIN_BATCH_SIZE = 2
LOWRES_CREATION_THRESHOLD = 0.25
LOWRES_SPACING_STEP = 1.03
PREPROCESSOR_NAME = "DefaultPreprocessor"
DEFAULT_DATA_PLANS = "nnUNetPlans"  # 2d / 3d_fullres data is shared between presets

NORMALIZATION_BY_CHANNEL_NAME = {
    "ct": "CTNormalization",
    "nonorm": "NoNormalization",
    "zscore": "ZScoreNormalization",
    "rescale_to_0_1": "RescaleTo01Normalization",
    "rgb_to_0_1": "RGBTo01Normalization",
}
# Only ZScore leaves voxels outside the nonzero mask at 0, so only it may use the mask.
MASK_CAPABLE_NORMALIZATION = {"ZScoreNormalization"}
RESAMPLING_FN = "resample_data_or_seg_to_shape"


def normalization_schemes(
    dataset_json: dict[str, Any], median_relative_size: float
) -> tuple[list[str], list[bool]]:
    """Scheme per channel from its name; the nonzero mask is used when cropping removed > 25%."""
    channels = dataset_json.get("channel_names", dataset_json.get("modality", {}))
    schemes = [
        NORMALIZATION_BY_CHANNEL_NAME.get(str(n).casefold(), "ZScoreNormalization")
        for n in channels.values()
    ]
    if median_relative_size < 3 / 4.0:
        return schemes, [s in MASK_CAPABLE_NORMALIZATION for s in schemes]
    return schemes, [False] * len(schemes)


def reader_writer_name(dataset_json: dict[str, Any] | str, example_file: Path | None = None) -> str:
    """The reader the dataset uses: ``overwrite_image_reader_writer``, else upstream's by ending.

    Without an example file a ``.tif`` dataset gets NaturalImage2DIO, as upstream without one;
    name Tiff3DIO in dataset.json (or use ``.tiff``) for 3-D tiffs.
    """
    if isinstance(dataset_json, str):  # a bare file ending
        dataset_json = {"file_ending": dataset_json}
    return reader_name(dataset_json, "dataset.json", example_file)


def data_identifier(plans_name: str, configuration: str, residual: bool) -> str:
    """Data folder name: the ResEnc planners reuse the default planner's 2d / 3d_fullres data
    (``nnUNetPlans_2d``) whatever their plans name; the default planner names its data after its
    plans (``-overwrite_plans_name nnUNetPlans_4GB`` -> ``nnUNetPlans_4GB_2d``), as upstream.
    """
    if residual and configuration in ("2d", "3d_fullres"):
        return f"{DEFAULT_DATA_PLANS}_{configuration}"
    return f"{plans_name}_{configuration}"


def _resampling_settings() -> dict[str, Any]:
    def kwargs(is_seg: bool, order: int) -> dict[str, Any]:
        return {"is_seg": is_seg, "order": order, "order_z": 0, "force_separate_z": None}

    return {
        "resampling_fn_data": RESAMPLING_FN,
        "resampling_fn_seg": RESAMPLING_FN,
        "resampling_fn_data_kwargs": kwargs(False, 3),
        "resampling_fn_seg_kwargs": kwargs(True, 1),
        "resampling_fn_probabilities": RESAMPLING_FN,
        "resampling_fn_probabilities_kwargs": kwargs(False, 1),
    }


@dataclass
class _Context:
    """Per-dataset inputs shared by every configuration of one planning run."""

    preset: PlannerPreset
    gpu_memory_target_gb: float
    num_classes: int
    schemes: list[str]
    use_mask: list[bool]
    cache: dict[str, int]


def _architecture(
    preset: PlannerPreset, dim: int, strides: Sequence, kernels: Sequence
) -> dict[str, Any]:
    n = len(strides)
    conv = f"torch.nn.modules.conv.Conv{dim}d"
    norm = f"torch.nn.modules.instancenorm.InstanceNorm{dim}d"
    kwargs: dict[str, Any] = {
        "n_stages": n,
        "features_per_stage": [min(MAX_FEATURES[dim], BASE_NUM_FEATURES * 2**i) for i in range(n)],
        "conv_op": conv,
        "kernel_sizes": [list(k) for k in kernels],
        "strides": [list(s) for s in strides],
        ("n_blocks_per_stage" if preset.residual else "n_conv_per_stage"): list(
            preset.blocks_encoder[:n]
        ),
        "n_conv_per_stage_decoder": list(preset.blocks_decoder[: n - 1]),
        "conv_bias": True,
        "norm_op": norm,
        "norm_op_kwargs": {"eps": 1e-05, "affine": True},
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    }
    return {
        "network_class_name": f"{NETWORK_MODULE}.{preset.network}",
        "arch_kwargs": kwargs,
        "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
    }


def _estimate(ctx: _Context, patch: Sequence[int], arch_kwargs: dict[str, Any]) -> int:
    key = f"{list(patch)}_{arch_kwargs['strides']}"
    if key not in ctx.cache:
        count: Callable[..., int] = (
            resenc_unet_feature_map_size if ctx.preset.residual else plain_unet_feature_map_size
        )
        blocks = arch_kwargs["n_blocks_per_stage" if ctx.preset.residual else "n_conv_per_stage"]
        ctx.cache[key] = count(
            patch,
            arch_kwargs["strides"],
            arch_kwargs["features_per_stage"],
            blocks,
            arch_kwargs["n_conv_per_stage_decoder"],
            ctx.num_classes,
        )
    return ctx.cache[key]


def plan_configuration(
    ctx: _Context,
    spacing: Sequence[float],
    median_shape: Sequence[float],
    identifier: str,
    approx_n_voxels_dataset: float,
) -> dict[str, Any]:
    """One configuration: the largest patch whose estimate fits the VRAM reference, then batch
    size."""
    dim = len(spacing)
    if any(s <= 0 for s in spacing):
        msg = f"spacing must be > 0 on every axis, got {list(spacing)}"
        raise ConfigurationError(msg)
    aspect = 1 / np.array(spacing, dtype=np.float64)
    volume = 256**3 if dim == 3 else 2048**2
    initial = [round(i) for i in aspect * (volume / np.prod(aspect)) ** (1 / dim)]
    initial = np.minimum(initial, np.asarray(median_shape[:dim]))
    topo = pool_and_conv_props(spacing, initial, DEFAULT_MIN_FEATURE_MAP_SIZE)
    patch = list(topo.patch_size)
    architecture = _architecture(ctx.preset, dim, topo.strides, topo.kernel_sizes)
    estimate = _estimate(ctx, patch, architecture["arch_kwargs"])
    reference_val = ctx.preset.reference_3d if dim == 3 else ctx.preset.reference_2d
    reference = reference_val * (ctx.gpu_memory_target_gb / ctx.preset.reference_gb)
    ref_bs = REFERENCE_BATCH_SIZE[dim]
    divisible_by = topo.divisible_by
    while ctx.preset.too_large(estimate, reference, ref_bs):
        # Shrink the axis that is largest relative to the median shape; the step is recomputed
        # on the shrunk size first so that valid sizes (e.g. 224 between 256 and 192) are kept.
        ratios = [p / m for p, m in zip(patch, median_shape[:dim], strict=True)]
        axis = int(np.argsort(ratios)[-1])
        trial = list(patch)
        trial[axis] -= divisible_by[axis]
        step = pool_and_conv_props(spacing, trial, DEFAULT_MIN_FEATURE_MAP_SIZE).divisible_by
        patch[axis] -= step[axis]
        if patch[axis] < 1:
            msg = f"no patch fits a GPU memory target of {ctx.gpu_memory_target_gb} GB"
            raise ConfigurationError(msg)
        topo = pool_and_conv_props(spacing, patch, DEFAULT_MIN_FEATURE_MAP_SIZE)
        patch, divisible_by = list(topo.patch_size), topo.divisible_by
        architecture = _architecture(ctx.preset, dim, topo.strides, topo.kernel_sizes)
        estimate = _estimate(ctx, patch, architecture["arch_kwargs"])
    batch_size = round(reference / estimate * ref_bs)
    cap = round(
        approx_n_voxels_dataset * ctx.preset.max_dataset_covered / np.prod(patch, dtype=np.float64)
    )
    batch_size = max(min(batch_size, cap), MIN_BATCH_SIZE)
    return {
        "data_identifier": identifier,
        "preprocessor_name": PREPROCESSOR_NAME,
        "batch_size": int(batch_size),
        "patch_size": [int(p) for p in patch],
        "median_image_size_in_voxels": [_number(m) for m in median_shape],
        "spacing": [float(s) for s in spacing],
        "normalization_schemes": list(ctx.schemes),
        "use_mask_for_norm": list(ctx.use_mask),
        **_resampling_settings(),
        "architecture": architecture,
    }


def _number(value: Any) -> int | float:
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def _plan_lowres(
    ctx: _Context,
    fullres: dict[str, Any],
    median_shape: np.ndarray,
    num_training: int,
    identifier: str,
) -> dict[str, Any] | None:
    """Coarsen the spacing in 3% steps until the fullres patch covers >= 25% of the image.

    Dropped unless the low-res image is at least 2x smaller than the full-res one.
    """
    fullres_spacing = np.array(fullres["spacing"], dtype=np.float64)
    spacing = fullres_spacing.copy()
    median_voxels = np.prod(median_shape, dtype=np.float64)
    patch_voxels = np.prod(fullres["patch_size"], dtype=np.float64)
    plan = None
    while patch_voxels / median_voxels < LOWRES_CREATION_THRESHOLD:
        coarse = max(spacing) / spacing > 2
        if np.any(coarse):
            spacing[coarse] *= LOWRES_SPACING_STEP
        else:
            spacing *= LOWRES_SPACING_STEP
        scaled = fullres_spacing / spacing * median_shape
        median_voxels = np.prod(scaled, dtype=np.float64)
        plan = plan_configuration(
            ctx,
            spacing.copy(),
            tuple(round(i) for i in scaled),
            identifier,
            float(median_voxels * num_training),
        )
        patch_voxels = np.prod(plan["patch_size"], dtype=np.int64)
    if np.prod(median_shape, dtype=np.float64) / median_voxels < 2:
        return None
    return plan


def plan_experiment(
    fingerprint: dict[str, Any],
    dataset_json: dict[str, Any],
    dataset_name: str,
    gpu_memory_target_gb: float | None = None,
    planner: str = "default",
    overwrite_target_spacing: Sequence[float] | None = None,
    plans_name: str | None = None,
) -> dict[str, Any]:
    """The whole plans dict (upstream's keys and order) for a fingerprint and ``dataset.json``.

    ``gpu_memory_target_gb`` defaults to the preset's own target (8 GB; 24/40 for ResEncL/XL).
    """
    preset = get_preset(planner)
    plans_name = plans_name or preset.plans_name
    gb = float(gpu_memory_target_gb) if gpu_memory_target_gb is not None else preset.reference_gb
    if gb <= 0:
        msg = f"gpu memory target must be > 0 GB, got {gpu_memory_target_gb}"
        raise ConfigurationError(msg)
    spacings, shapes = fingerprint["spacings"], fingerprint["shapes_after_crop"]
    if overwrite_target_spacing is not None:
        if len(overwrite_target_spacing) != len(spacings[0]) or min(overwrite_target_spacing) <= 0:
            msg = (
                f"target spacing {list(overwrite_target_spacing)} must give {len(spacings[0])} "
                "values > 0"
            )
            raise ConfigurationError(msg)
        fullres_spacing = np.array(overwrite_target_spacing, dtype=np.float64)
    else:
        fullres_spacing = fullres_target_spacing(spacings, shapes)
    forward, backward = transpose_axes(fullres_spacing)
    schemes, use_mask = normalization_schemes(
        dataset_json, fingerprint["median_relative_size_after_cropping"]
    )
    ctx = _Context(preset, gb, len(dataset_json["labels"]), schemes, use_mask, {})
    spacing_t = fullres_spacing[forward]
    new_shapes = [
        compute_new_shape(shape, sp, fullres_spacing)
        for sp, shape in zip(spacings, shapes, strict=True)
    ]
    median_t = np.median(new_shapes, 0)[forward]
    num_training = int(dataset_json["numTraining"])
    n_voxels = float(np.prod(median_t, dtype=np.float64) * num_training)

    def ident(configuration: str) -> str:
        return data_identifier(plans_name, configuration, residual=preset.residual)

    fullres = lowres = None
    if median_t[0] != 1:
        fullres = plan_configuration(ctx, spacing_t, median_t, ident("3d_fullres"), n_voxels)
        lowres = _plan_lowres(ctx, fullres, median_t, num_training, ident("3d_lowres"))
        if lowres is not None:
            lowres["batch_dice"] = False
        fullres["batch_dice"] = lowres is not None
    plan_2d = plan_configuration(ctx, spacing_t[1:], median_t[1:], ident("2d"), n_voxels)
    plan_2d["batch_dice"] = True

    configurations: dict[str, Any] = {"2d": plan_2d}
    if lowres is not None:
        configurations["3d_lowres"] = lowres
        if fullres is not None:
            lowres["next_stage"] = "3d_cascade_fullres"
    if fullres is not None:
        configurations["3d_fullres"] = fullres
        if lowres is not None:
            configurations["3d_cascade_fullres"] = {
                "inherits_from": "3d_fullres",
                "previous_stage": "3d_lowres",
            }
    return {
        "dataset_name": dataset_name,
        "plans_name": plans_name,
        "original_median_spacing_after_transp": [float(i) for i in np.median(spacings, 0)[forward]],
        "original_median_shape_after_transp": [
            int(round(i)) for i in np.median(shapes, 0)[forward]
        ],
        "image_reader_writer": reader_writer_name(dataset_json),
        "transpose_forward": [int(i) for i in forward],
        "transpose_backward": [int(i) for i in backward],
        "configurations": configurations,
        "experiment_planner_used": preset.planner_name,
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": fingerprint[
            "foreground_intensity_properties_per_channel"
        ],
    }
