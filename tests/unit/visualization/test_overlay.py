"""The overlay drawing (``nnunet_core.visualization.overlay``) on hand-made arrays: upstream's
slice rule, its intensity scaling and blending, our fixed label colours, the PNG file."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from nnunet_core.visualization.overlay import (
    COLOUR_CYCLE,
    colour_of,
    overlay_rgb,
    select_slice,
    write_png,
)


def volume(*slices: list[list[int]]) -> np.ndarray:
    return np.array(slices, dtype=np.int16)


def labelled(counts: dict[int, int], size: int = 16) -> list[list[int]]:
    """One 4x4 slice with ``counts[label]`` voxels of each label, background elsewhere."""
    flat = [label for label, n in counts.items() for _ in range(n)]
    flat += [0] * (size - len(flat))
    return np.array(flat).reshape(4, 4).tolist()


def test_one_class_the_slice_with_most_foreground_first_on_a_tie() -> None:
    seg = volume(labelled({1: 2}), labelled({1: 5}), labelled({1: 5}), labelled({}))
    assert select_slice(seg) == 1


def test_classes_weigh_equally_not_voxels() -> None:
    # slice 0: 10 organ voxels; slice 1: 5 organ voxels and the whole 3-voxel lesion. By voxels
    # slice 0 wins (10 > 8); by upstream's per-class shares slice 1 (the lesion's only slice).
    seg = volume(labelled({1: 10}), labelled({1: 5, 2: 3}))
    assert select_slice(seg) == 1


def test_upstream_running_total_division_is_kept() -> None:
    # label 1: 1 voxel in slice 0, 8 in slice 1; label 2: a single voxel, in slice 0. As shares
    # of each class's volume slice 0 wins ((1/9 + 1) / 2 > (8/9) / 2); upstream divides label 2's
    # column by the table's running total (1 + 1), so slice 1 wins: (1/9 + 1/2) / 2 < (8/9) / 2.
    seg = volume(labelled({1: 1, 2: 1}), labelled({1: 8}))
    assert select_slice(seg) == 1


def test_background_and_outside_labels_count_for_nothing() -> None:
    seg = volume(labelled({-1: 12}), labelled({0: 16}), labelled({1: 1, -1: 15}))
    assert select_slice(seg) == 2
    assert select_slice(volume(labelled({-1: 3}), labelled({}))) == 0


def test_a_2d_segmentation_is_refused() -> None:
    with pytest.raises(ValueError, match="3-D"):
        select_slice(np.zeros((4, 4)))


def test_colours_are_upstreams_cycle_by_label_value() -> None:
    assert colour_of(0) == (0, 0, 0)
    assert colour_of(1) == (0x43, 0x63, 0xD8)
    assert colour_of(2) == (0xF5, 0x82, 0x31)
    assert colour_of(14) == (0x46, 0x99, 0x90)
    # past the cycle: wraps onto the foreground colours, never the background's black
    assert colour_of(15) == colour_of(1) and colour_of(28) == colour_of(14)
    assert len(set(map(colour_of, range(1, 15)))) == 14 == len(COLOUR_CYCLE) - 1


def test_overlay_scales_the_image_and_adds_the_weighted_colour() -> None:
    image = np.array([[0.0, 1.0], [2.0, 4.0]], dtype=np.float32) - 7  # shifted: min goes to 0
    seg = np.array([[0, 1], [2, 0]])
    rgb = overlay_rgb(image, seg, overlay_intensity=0.5)
    assert rgb.shape == (2, 2, 3) and rgb.dtype == np.uint8
    # the brightest pixel (255 grey) stays the maximum, so the second scaling keeps the values
    assert rgb[0, 0].tolist() == [0, 0, 0] and rgb[1, 1].tolist() == [255, 255, 255]
    # 63.75 + 0.5 * (67, 99, 216) and 127.5 + 0.5 * (245, 130, 49), truncated (float32: +-1)
    assert np.abs(rgb[0, 1].astype(int) - [97, 113, 171]).max() <= 1
    assert np.abs(rgb[1, 0].astype(int) - [250, 192, 152]).max() <= 1


def test_overlay_intensity_zero_is_the_grey_image_and_higher_darkens_it() -> None:
    image = np.arange(16, dtype=np.float32).reshape(4, 4)
    seg = np.zeros((4, 4), dtype=np.int16)
    seg[0, :2] = 1
    grey = overlay_rgb(image, seg, overlay_intensity=0.0)
    assert (grey[..., 0] == grey[..., 1]).all() and (grey[..., 1] == grey[..., 2]).all()
    assert grey[3, 3].tolist() == [255] * 3
    strong = overlay_rgb(image, seg, overlay_intensity=3.0)
    # label 1's blue (216) times 3 outshines the image: the blue channel is the new maximum
    assert strong[0, 1, 2] == 255 and strong[0, 1, 2] > strong[0, 1, 0]
    assert strong[3, 3, 0] < 255 and strong[3, 3, 0] == strong[3, 3, 2]


def test_a_label_keeps_its_colour_when_lower_labels_are_absent() -> None:
    image = np.zeros((2, 2), dtype=np.float32)
    image[1, 1] = 1.0
    only_two = overlay_rgb(image, np.array([[2, 0], [0, 0]]))
    with_one = overlay_rgb(image, np.array([[2, 1], [0, 0]]))
    assert only_two[0, 0].tolist() == with_one[0, 0].tolist()
    red, green, blue = only_two[0, 0].tolist()
    assert red > green > blue  # orange (f58231), not label 1's blue as upstream would draw it


def test_a_constant_image_without_labels_is_black_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rgb = overlay_rgb(np.full((3, 3), 5.0), np.zeros((3, 3), dtype=np.uint8))
    assert not rgb.any()


def test_shapes_must_agree() -> None:
    with pytest.raises(ValueError, match="same shape|its shape"):
        overlay_rgb(np.zeros((3, 3)), np.zeros((3, 4)))


def test_write_png_round_trips_and_leaves_no_temporary(tmp_path: Path) -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    path = write_png(tmp_path / "sub" / "case.png", rgb)
    assert [p.name for p in path.parent.iterdir()] == ["case.png"]
    read = imread(path)
    assert read.shape == (5, 7, 4)
    assert (np.round(read[..., :3] * 255).astype(np.uint8) == rgb).all()
    assert (read[..., 3] == 1.0).all()
