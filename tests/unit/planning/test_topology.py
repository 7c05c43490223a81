"""Network topology (pooling/kernels/padding) and the analytic VRAM estimate vs upstream's
numbers."""

from __future__ import annotations

import json

import pytest

from nnunet_core.planning.feature_map_size import (
    plain_unet_feature_map_size,
    resenc_unet_feature_map_size,
)
from nnunet_core.planning.topology import pad_shape, pool_and_conv_props
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "plans"
ESTIMATES = json.loads((DATA / "vram_estimates.json").read_text())


def test_isotropic_128_cube_pools_five_times() -> None:
    topo = pool_and_conv_props((1.0, 1.0, 1.0), (128, 128, 128))
    assert topo.num_pool_per_axis == (5, 5, 5)
    assert topo.strides == ((1, 1, 1),) + ((2, 2, 2),) * 5
    assert topo.kernel_sizes == ((3, 3, 3),) * 6
    assert topo.patch_size == (128, 128, 128)
    assert topo.divisible_by == (32, 32, 32)


def test_anisotropic_spacing_delays_z_pooling_and_kernels() -> None:
    topo = pool_and_conv_props((3.0, 0.8, 0.8), (40, 224, 224))
    assert topo.num_pool_per_axis == (3, 5, 5)
    assert topo.strides == ((1, 1, 1), (1, 2, 2), (2, 2, 2), (2, 2, 2), (2, 2, 2), (1, 2, 2))
    assert topo.kernel_sizes[0] == (1, 3, 3)
    assert topo.kernel_sizes[1:] == ((3, 3, 3),) * 5


def test_strong_anisotropy_and_2d() -> None:
    assert pool_and_conv_props((5.0, 1.0, 1.0), (20, 256, 256)).num_pool_per_axis == (2, 6, 6)
    topo_2d = pool_and_conv_props((1.0, 1.0), (512, 512))
    assert topo_2d.num_pool_per_axis == (7, 7)
    assert topo_2d.n_stages == 8


def test_float_patch_is_halved_with_ceil_and_padded() -> None:
    # scenario c: the initial patch is clipped to the float median shape (45.5, 64.5, 65.5)
    topo = pool_and_conv_props((2.5, 0.8, 0.8), (45.5, 64.5, 65.5))
    assert topo.patch_size == (48, 80, 80)
    assert topo.strides == ((1, 1, 1), (1, 2, 2), (2, 2, 2), (2, 2, 2), (2, 2, 2))


def test_single_valid_axis_needs_three_times_min_size() -> None:
    # only x can still pool; 11 < 3 * 4 stops, 12 allows one more pool
    assert pool_and_conv_props((4.0, 4.0, 1.0), (8, 8, 11)).num_pool_per_axis == (0, 0, 0)
    assert pool_and_conv_props((4.0, 4.0, 1.0), (4, 4, 12)).num_pool_per_axis == (0, 0, 1)


def test_pad_shape_keeps_multiples_and_rounds_up_others() -> None:
    assert pad_shape((64, 65, 45.5), (32, 32, 16)) == (64, 96, 48)


@pytest.mark.parametrize("network", ["PlainConvUNet", "ResidualEncoderUNet"])
def test_feature_map_size_matches_every_upstream_estimate(network: str) -> None:
    count = (
        plain_unet_feature_map_size if network == "PlainConvUNet" else resenc_unet_feature_map_size
    )
    calls = [c for c in ESTIMATES if c["network"] == network]
    assert len(calls) > 20
    mismatches = []
    for c in calls:
        got = count(
            c["patch_size"],
            c["strides"],
            c["features_per_stage"],
            c["blocks_per_stage_encoder"],
            c["blocks_per_stage_decoder"],
            c["output_channels"],
        )
        if got != c["estimate"]:
            mismatches.append((c["source"], c["patch_size"], got, c["estimate"]))
    assert mismatches == []


def test_deep_supervision_adds_a_head_per_lower_resolution_stage() -> None:
    args = ((64, 64, 64), ((1, 1, 1), (2, 2, 2), (2, 2, 2)), (32, 64, 128), (2, 2, 2), (2, 2))
    without = plain_unet_feature_map_size(*args, num_classes=3)
    with_ds = plain_unet_feature_map_size(*args, num_classes=3, deep_supervision=True)
    assert with_ds - without == 3 * 32**3  # the head on the 32^3 decoder stage
