"""Intensity normalization per channel, bit-identical to upstream's schemes.

A plan names one scheme per channel (``normalization_schemes``); the planner picks it from the
channel name (case-insensitive; anything unknown is ZScore). All arithmetic is float32 with numpy
reductions over the same memory layout as upstream, so the statistics round the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from nnunet_core.errors import ConfigurationError, DatasetError

CT = "CTNormalization"
NO_NORM = "NoNormalization"
ZSCORE = "ZScoreNormalization"
RESCALE_01 = "RescaleTo01Normalization"
RGB_01 = "RGBTo01Normalization"

_BY_CHANNEL_NAME = {
    "ct": CT,
    "nonorm": NO_NORM,
    "zscore": ZSCORE,
    "rescale_to_0_1": RESCALE_01,
    "rgb_to_0_1": RGB_01,
}
# schemes that leave voxels outside the nonzero mask at 0 when use_mask_for_norm is on
LEAVES_OUTSIDE_AT_ZERO = frozenset({ZSCORE})
EPS = 1e-8


def scheme_for_channel(channel_name: str) -> str:
    """The scheme upstream's planner picks for a channel name (unknown names give ZScore)."""
    return _BY_CHANNEL_NAME.get(str(channel_name).casefold(), ZSCORE)


def _zscore(image: np.ndarray, mask: np.ndarray | None, _props: Mapping[str, float] | None) -> None:
    if mask is None:
        mean = image.mean()
        std = image.std()
        image -= mean
        image /= max(std, EPS)
        return
    values = image[mask]
    mean = values.mean()
    std = values.std()
    # outside the mask stays untouched (0 there, because the mask is the nonzero region)
    image[mask] = (values - mean) / max(std, EPS)


def _ct(image: np.ndarray, _mask: np.ndarray | None, props: Mapping[str, float] | None) -> None:
    assert props is not None
    np.clip(image, props["percentile_00_5"], props["percentile_99_5"], out=image)
    image -= props["mean"]
    image /= max(props["std"], EPS)


def _none(_image: np.ndarray, _mask: np.ndarray | None, _props: Mapping[str, float] | None) -> None:
    return None


def _rescale01(
    image: np.ndarray, _mask: np.ndarray | None, _props: Mapping[str, float] | None
) -> None:
    image -= image.min()
    image /= np.clip(image.max(), a_min=EPS, a_max=None)


def _rgb01(image: np.ndarray, _mask: np.ndarray | None, _props: Mapping[str, float] | None) -> None:
    if image.min() < 0 or image.max() > 255:
        msg = f"RGBTo01Normalization needs values in 0..255, got {image.min()}..{image.max()}"
        raise DatasetError(msg)
    image /= 255.0


_SCHEMES: dict[str, Callable[[np.ndarray, np.ndarray | None, Mapping[str, float] | None], None]] = {
    CT: _ct,
    NO_NORM: _none,
    ZSCORE: _zscore,
    RESCALE_01: _rescale01,
    RGB_01: _rgb01,
}
_CT_KEYS = ("mean", "std", "percentile_00_5", "percentile_99_5")


def normalize(
    data: np.ndarray,
    seg: np.ndarray,
    schemes: Sequence[str],
    use_mask_for_norm: Sequence[bool],
    intensity_properties: Mapping[str, Mapping[str, Any]] | None,
    case_id: str = "",
) -> np.ndarray:
    """Normalize float32 ``(c, z, y, x)`` ``data`` in place, channel by channel; returns it.

    ``seg`` is the cropped ``(1, z, y, x)`` seg: ``seg >= 0`` is the nonzero mask used where
    ``use_mask_for_norm`` is on. ``intensity_properties`` is the plans'
    ``foreground_intensity_properties_per_channel`` (needed by CT).
    """
    where = f"case {case_id}" if case_id else "normalization"
    if data.dtype != np.float32:
        msg = f"{where}: normalization expects float32 data, got {data.dtype}"
        raise ConfigurationError(msg)
    if len(schemes) != data.shape[0] or len(use_mask_for_norm) != data.shape[0]:
        msg = (
            f"{where}: {data.shape[0]} channels but {len(schemes)} normalization schemes / "
            f"{len(use_mask_for_norm)} use_mask_for_norm entries in the plans"
        )
        raise ConfigurationError(msg)
    mask: np.ndarray | None = None
    for c, (scheme, use_mask) in enumerate(zip(schemes, use_mask_for_norm, strict=False)):
        function = _SCHEMES.get(scheme)
        if function is None:
            msg = (
                f"{where}: unknown normalization scheme {scheme!r} for channel {c} (known: "
                f"{', '.join(_SCHEMES)})"
            )
            raise ConfigurationError(msg)
        props = (intensity_properties or {}).get(str(c))
        if scheme == CT and (props is None or any(k not in props for k in _CT_KEYS)):
            msg = (
                f"{where}: CTNormalization of channel {c} needs "
                f"foreground_intensity_properties_per_channel['{c}'] with {', '.join(_CT_KEYS)} in "
                "the plans"
            )
            raise ConfigurationError(msg)
        channel_mask = None
        if use_mask and scheme == ZSCORE:
            if mask is None:
                mask = seg[0] >= 0
            channel_mask = mask
        try:
            function(data[c], channel_mask, props)
        except DatasetError as exc:
            msg = f"{where}, channel {c}: {exc}"
            raise DatasetError(msg) from None
    return data
