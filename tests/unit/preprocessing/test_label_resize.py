"""The label-map resize scored only where labels meet equals whole-volume scoring bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage as ndi
from skimage.transform import resize

from nnunet_core.preprocessing.label_resize import grid_coordinates, resize_mixed_only
from nnunet_core.preprocessing.resampling import resize_segmentation, zoom_resize
from tests.helpers.resampling import reference_seg_resize


def _organs(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Background, two smooth blobs and a small lesion inside one: labels as real maps hold."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(-1, 1, s) for s in shape], indexing="ij")
    seg = np.zeros(shape, np.int16)
    for label, radius in ((1, 0.6), (2, 0.3), (3, 0.12)):
        centre = rng.uniform(-0.3, 0.3, len(shape))
        distance = sum((g - c) ** 2 for g, c in zip(grids, centre, strict=True))
        seg[distance < radius**2] = label
    return seg


@pytest.mark.parametrize(
    ("shape", "new_shape"),
    [
        ((30, 34, 28), (24, 27, 22)),  # downsampling, as 3d_lowres
        ((15, 17, 14), (30, 34, 28)),  # factor-2 upsampling: exact 0.5 ties on every boundary
        ((40, 44), (29, 61)),  # one slice of a separate-z resize
    ],
)
def test_mixed_only_equals_whole_volume_scores(shape, new_shape) -> None:
    for seed in range(3):
        seg = _organs(shape, seed)
        labels = np.unique(seg)
        nearest = zoom_resize(seg, new_shape, 0, seg.dtype)
        fast = resize_mixed_only(seg, new_shape, labels, nearest)
        assert fast is not None, "the boundary path must be taken on organ-like maps"
        assert fast.dtype == seg.dtype
        assert np.array_equal(fast, reference_seg_resize(seg, new_shape))
        assert np.array_equal(resize_segmentation(seg, new_shape), fast)


def test_noise_like_map_falls_back_to_whole_volume_scores() -> None:
    seg = np.random.default_rng(0).integers(0, 3, size=(12, 13, 11)).astype(np.int16)
    nearest = zoom_resize(seg, (9, 20, 8), 0, seg.dtype)
    assert resize_mixed_only(seg, (9, 20, 8), np.unique(seg), nearest) is None
    assert np.array_equal(
        resize_segmentation(seg, (9, 20, 8)), reference_seg_resize(seg, (9, 20, 8))
    )


@pytest.mark.parametrize("seed", range(6))
def test_point_scores_are_zooms_values(seed: int) -> None:
    """What the boundary path rests on: map_coordinates at grid_coordinates == zoom, exactly."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(5, 30, 2 + seed % 2))
    new_shape = tuple(int(s) for s in rng.integers(3, 45, len(shape)))
    indicator = (rng.random(shape) < 0.5).view(np.uint8)
    zoomed = resize(indicator, new_shape, 1, mode="edge", anti_aliasing=False, preserve_range=True)
    axes = [grid_coordinates(i, o) for i, o in zip(shape, new_shape, strict=True)]
    where = np.stack(np.meshgrid(*axes, indexing="ij"))
    points = ndi.map_coordinates(indicator, where, output=np.float64, order=1, mode="nearest")
    # skimage clips to the input's range, as label_resize does after map_coordinates
    assert np.array_equal(np.clip(points, 0.0, 1.0), zoomed)
