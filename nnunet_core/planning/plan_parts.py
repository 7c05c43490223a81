"""The parts of a plans file that do not depend on the planner's choices: normalization per
channel, the reader, the resampling functions, the network's settings around its topology.

Upstream's keys and values, so that plans made here stay interchangeable with upstream's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.io.readers import reader_name

NETWORK_MODULE = "dynamic_network_architectures.architectures.unet"
PLAIN_UNET, RESENC_UNET = "PlainConvUNet", "ResidualEncoderUNet"
BASE_NUM_FEATURES = 32
MAX_FEATURES = {2: 512, 3: 320}
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


def resampling_settings() -> dict[str, Any]:
    """Upstream's resampling functions and their arguments (data: order 3, labels: order 1)."""

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


def unet_architecture(
    network: str,
    dim: int,
    strides: Sequence[Sequence[int]],
    kernels: Sequence[Sequence[int]],
    blocks_encoder: Sequence[int],
    blocks_decoder: Sequence[int],
) -> dict[str, Any]:
    """The plans' ``architecture`` entry of a U-Net (``network``: PlainConvUNet or
    ResidualEncoderUNet) with these strides and kernels, one stage per stride."""
    n = len(strides)
    conv = f"torch.nn.modules.conv.Conv{dim}d"
    norm = f"torch.nn.modules.instancenorm.InstanceNorm{dim}d"
    kwargs: dict[str, Any] = {
        "n_stages": n,
        "features_per_stage": [min(MAX_FEATURES[dim], BASE_NUM_FEATURES * 2**i) for i in range(n)],
        "conv_op": conv,
        "kernel_sizes": [list(k) for k in kernels],
        "strides": [list(s) for s in strides],
        ("n_blocks_per_stage" if network == RESENC_UNET else "n_conv_per_stage"): list(
            blocks_encoder[:n]
        ),
        "n_conv_per_stage_decoder": list(blocks_decoder[: n - 1]),
        "conv_bias": True,
        "norm_op": norm,
        "norm_op_kwargs": {"eps": 1e-05, "affine": True},
        "dropout_op": None,
        "dropout_op_kwargs": None,
        "nonlin": "torch.nn.LeakyReLU",
        "nonlin_kwargs": {"inplace": True},
    }
    return {
        "network_class_name": f"{NETWORK_MODULE}.{network}",
        "arch_kwargs": kwargs,
        "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
    }


def plain_number(value: Any) -> int | float:
    """A numpy or Python number as the JSON number upstream writes (int stays int)."""
    return int(value) if isinstance(value, (int, np.integer)) else float(value)
