"""Resampling: skimage-identical resize, batchgenerators 0.25.5 seg rule, separate-z decisions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.ndimage import map_coordinates
from skimage.transform import resize

from nnunet_core.preprocessing.resampling import (
    ResamplePlan,
    compute_new_shape,
    plan_resampling,
    resample,
    resize_segmentation,
    zoom_resize,
)
from tests.helpers.resampling import reference_seg_resize


@pytest.mark.parametrize("order", [0, 1, 3])
@pytest.mark.parametrize(("shape", "new_shape"), [((9, 13), (17, 6)), ((7, 10, 12), (11, 10, 5))])
def test_zoom_resize_is_skimage_resize_bit_for_bit(order, shape, new_shape) -> None:
    image = np.random.default_rng(order).normal(size=shape).astype(np.float32)
    expected = resize(image.astype(np.float64), new_shape, order, mode="edge", anti_aliasing=False)
    assert np.array_equal(zoom_resize(image, new_shape, order), expected)
    # straight into float32 == upstream's float64 result cast afterwards
    assert np.array_equal(
        zoom_resize(image, new_shape, order, np.float32), expected.astype(np.float32)
    )


@pytest.mark.parametrize("seed", range(4))
def test_resize_segmentation_argmax_with_nearest_tie_break(seed: int) -> None:
    rng = np.random.default_rng(seed)
    seg = rng.integers(-1, 3, size=(8, 9, 10)).astype(np.int16)
    # factor-2 upsampling puts exact 0.5/0.5 ties at every boundary
    for shape in ((16, 18, 20), (5, 13, 7)):
        ours = resize_segmentation(seg, shape)
        assert ours.dtype == np.int16
        assert np.array_equal(ours, reference_seg_resize(seg, shape))


def test_resize_segmentation_single_label_and_order_zero() -> None:
    assert np.all(resize_segmentation(np.full((3, 4), 2, np.int16), (6, 2)) == 2)
    seg = np.arange(12, dtype=np.int16).reshape(3, 4)
    expected = resize(seg.astype(float), (5, 7), 0, mode="edge", anti_aliasing=False)
    assert np.array_equal(resize_segmentation(seg, (5, 7), 0), expected)


def test_new_shape_rounds_like_python() -> None:
    assert compute_new_shape(
        (33, 45, 40), (3.0, 0.75, 0.75), (2.5, 0.800000011920929, 0.800000011920929)
    ) == (40, 42, 37)
    assert compute_new_shape((5, 5, 5), (1.0, 1.0, 1.0), (2.0, 2.0, 2.0)) == (2, 2, 2)  # 2.5 -> 2


def test_separate_z_decision() -> None:
    shape = (10, 10, 10)
    assert plan_resampling(shape, (3.0, 0.75, 0.75), (2.5, 0.8, 0.8)).separate_axis == 0
    assert (
        plan_resampling(shape, (1.0, 1.0, 1.0), (1.0, 4.0, 1.0)).separate_axis == 1
    )  # target decides
    assert plan_resampling(shape, (1.5, 0.9, 0.9), (1.5, 0.9, 0.9)).separate_axis is None
    assert plan_resampling(shape, (4.0, 4.0, 1.0), (4.0, 4.0, 1.0)).separate_axis is None  # tie
    assert (
        plan_resampling(
            shape, (1.0, 1.0, 1.0), (4.0, 1.0, 1.0), force_separate_z=False
        ).separate_axis
        is None
    )
    assert (
        plan_resampling(
            shape, (1.0, 2.0, 1.0), (1.0, 1.0, 1.0), force_separate_z=True
        ).separate_axis
        == 1
    )


def _upstream_separate_z(volume: np.ndarray, new_shape: tuple[int, int, int]) -> np.ndarray:
    """Upstream's path: every slice resized in-plane, then map_coordinates over a full grid."""
    inplane = np.stack(
        [
            resize(s.astype(float), new_shape[1:], 3, mode="edge", anti_aliasing=False)
            for s in volume
        ]
    )
    grids = np.mgrid[: new_shape[0], : new_shape[1], : new_shape[2]].astype(float)
    scales = [o / n for o, n in zip(inplane.shape, new_shape, strict=True)]
    coords = np.array([s * (g + 0.5) - 0.5 for s, g in zip(scales, grids, strict=True)])
    return map_coordinates(inplane, coords, order=0, mode="nearest").astype(np.float32)


@pytest.mark.parametrize("new_z", [5, 9, 14])
def test_separate_z_picks_only_needed_slices_with_same_result(new_z: int) -> None:
    volume = np.random.default_rng(new_z).normal(size=(1, 9, 12, 11)).astype(np.float32)
    plan = ResamplePlan((new_z, 15, 8), 0)
    cache: dict = {}
    out = resample(volume, plan, is_seg=False, order=3, order_z=0, slice_cache=cache)
    assert np.array_equal(out[0], _upstream_separate_z(volume[0], plan.new_shape))
    # a second configuration with the same in-plane target reuses the cached slices exactly
    again = resample(volume, ResamplePlan((9, 15, 8), 0), False, 3, 0, cache)
    assert np.array_equal(again, resample(volume, ResamplePlan((9, 15, 8), 0), False, 3, 0))


def test_unchanged_shape_returns_input_and_seg_keeps_dtype() -> None:
    seg = np.random.default_rng(0).integers(-1, 3, size=(1, 6, 7, 8)).astype(np.int16)
    assert resample(seg, ResamplePlan((6, 7, 8), None), True, 1) is seg
    out = resample(seg, ResamplePlan((12, 14, 16), None), True, 1)
    assert out.dtype == np.int16 and set(np.unique(out)) <= {-1, 0, 1, 2}
