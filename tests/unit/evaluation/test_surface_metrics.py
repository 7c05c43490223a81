"""HD95 and NSD (MONAI, in mm) against hand-computed values for shifted spheres and circles.

A sphere shifted by d mm along one axis: a surface point at angle t to that axis lies about
d |cos t| from the other sphere, and on a sphere cos t is uniform on [-1, 1] (Archimedes), so the
distances are uniform on [0, d]: HD95 = 0.95 d and NSD(tol) = tol / d. On a circle t is uniform:
HD95 = d cos(0.025 pi) and NSD(tol) = 1 - (2 / pi) arccos(tol / d). Voxels move surfaces by up to
half a voxel, so each value must lie within the hand value for distances off by one voxel's size
(the shift axis' spacing): HD95 within one voxel, NSD between its values at tol -+ half a voxel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnunet_core.evaluation.surface import image_diagonal_mm, surface_metrics
from tests.helpers.surface import ball


def sphere_nsd(tolerance: float, shift: float) -> float:
    return min(1.0, max(0.0, tolerance / shift))


def circle_nsd(tolerance: float, shift: float) -> float:
    return 1 - 2 / math.pi * math.acos(min(1.0, max(0.0, tolerance / shift)))


@pytest.mark.parametrize(
    ("spacing", "shift"),
    [
        ((1.0, 1.0, 1.0), 2.0),
        ((1.0, 1.0, 1.0), 4.0),
        ((2.0, 1.0, 1.0), 4.0),
        ((1.0, 0.5, 0.5), 3.0),
    ],
)
def test_shifted_sphere_matches_the_hand_computed_values(spacing, shift) -> None:
    shape = tuple(int(64 / s) for s in spacing)
    reference = ball(shape, spacing, (32, 32, 32), 14)
    prediction = ball(shape, spacing, (32 + shift, 32, 32), 14)
    tolerance, voxel = 1.0, spacing[0]
    found = surface_metrics(reference, prediction, spacing, tolerance)
    assert found["HD95"] == pytest.approx(0.95 * shift, abs=voxel)
    low = sphere_nsd(tolerance - voxel / 2, shift)
    high = sphere_nsd(tolerance + voxel / 2, shift)
    assert low <= found["NSD"] <= high, (found, low, high)
    assert "surface_empty" not in found


def test_a_larger_tolerance_counts_more_of_the_surface() -> None:
    spacing = (1.0, 1.0, 1.0)
    reference = ball((64,) * 3, spacing, (32, 32, 32), 14)
    prediction = ball((64,) * 3, spacing, (36, 32, 32), 14)
    values = [surface_metrics(reference, prediction, spacing, t)["NSD"] for t in (1, 2, 3, 5)]
    assert values == sorted(values) and values[0] < values[2] and values[-1] == 1.0


def test_shifted_circle_in_a_single_slice_uses_the_in_plane_spacing() -> None:
    spacing = (5.0, 0.5, 0.5)  # a 2-D case stored as one slice: the 5 mm axis must not count
    reference = ball((1, 128, 128), spacing, (0, 32, 32), 20)
    prediction = ball((1, 128, 128), spacing, (0, 35, 32), 20)
    found = surface_metrics(reference, prediction, spacing, 2.0)
    assert found["HD95"] == pytest.approx(3 * math.cos(0.025 * math.pi), abs=0.5)
    assert circle_nsd(1.75, 3) <= found["NSD"] <= circle_nsd(2.25, 3)


def test_identical_masks_are_perfect() -> None:
    mask = ball((32,) * 3, (1.0,) * 3, (16, 16, 16), 8)
    assert surface_metrics(mask, mask.copy(), (1.0, 1.0, 1.0), 1.0) == {"HD95": 0.0, "NSD": 1.0}


def test_both_empty_is_perfect_agreement() -> None:
    empty = np.zeros((8, 9, 10), dtype=bool)
    assert surface_metrics(empty, empty, (1.0, 2.0, 3.0), 1.0) == {"HD95": 0.0, "NSD": 1.0}


@pytest.mark.parametrize("empty_side", ["reference", "prediction"])
def test_one_empty_side_is_the_worst_case_and_named(empty_side) -> None:
    spacing = (3.0, 1.0, 0.5)
    mask = np.zeros((8, 9, 10), dtype=bool)
    mask[2:4, 2:4, 2:4] = True
    empty = np.zeros_like(mask)
    pair = (empty, mask) if empty_side == "reference" else (mask, empty)
    found = surface_metrics(*pair, spacing, 1.0)
    diagonal = math.sqrt((7 * 3.0) ** 2 + (8 * 1.0) ** 2 + (9 * 0.5) ** 2)
    assert found == {"HD95": pytest.approx(diagonal), "NSD": 0.0, "surface_empty": empty_side}
    assert image_diagonal_mm(mask.shape, spacing) == pytest.approx(diagonal)


def test_mismatched_spacing_is_refused() -> None:
    mask = np.ones((4, 4, 4), dtype=bool)
    with pytest.raises(ValueError, match="spacing"):
        surface_metrics(mask, mask, (1.0, 1.0), 1.0)
