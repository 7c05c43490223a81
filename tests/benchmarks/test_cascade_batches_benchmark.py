"""The pure parts of benchmarks/parity/cascade_batches.py: per-sample statistics and the
comparison."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.parity import cascade_batches as cb


def test_a_sample_gives_its_label_shares_and_the_one_hot_dice() -> None:
    target = np.zeros((1, 1, 4, 4), dtype=np.int16)
    target[0, 0, :2] = 1  # label 1: top half (8 of 16 voxels)
    target[0, 0, 3, 3] = 2  # label 2: one voxel
    image = np.full((1, 1, 4, 4), 2.0, dtype=np.float32)
    one_hot_1 = (target == 1).astype(np.float32)
    one_hot_1[0, 0, 0] = 0  # the previous stage missed a row: 4 of 8 voxels
    one_hot_2 = np.zeros_like(one_hot_1)  # and the lesion
    data = np.concatenate((image, one_hot_1, one_hot_2), axis=1)
    (row,) = cb.sample_rows(data, target, [1, 2])
    assert row["image_mean"] == 2.0 and row["image_sd"] == 0.0
    assert row["target_1"] == 0.5 and row["input_1"] == 0.25
    assert row["dice_1"] == pytest.approx(2 * 4 / (4 + 8))
    assert row["target_2"] == 1 / 16 and row["input_2"] == 0.0 and row["dice_2"] == 0.0
    empty = cb.sample_rows(np.zeros((1, 3, 4, 4)), np.zeros((1, 1, 4, 4)), [1, 2])[0]
    assert empty["dice_1"] is None  # neither has the label: no Dice, dropped in the comparison


def test_a_first_stage_sample_gives_label_shares_and_presence_without_one_hot() -> None:
    target = np.zeros((2, 1, 4, 4), dtype=np.int16)
    target[:, 0, :2] = 1  # both samples: organ in the top half
    target[0, 0, 3, 3] = 2  # only the first has a lesion voxel
    data = np.ones((2, 1, 4, 4), dtype=np.float32)  # the image only: no previous stage
    first, second = cb.sample_rows(data, target, [1, 2], False)
    assert first["image_mean"] == 1.0 and first["target_2"] == 1 / 16
    assert first["present_2"] == 1.0 and second["present_2"] == 0.0 and second["target_2"] == 0.0
    assert second["present_1"] == 1.0 and second["target_1"] == 0.5
    assert not any(key.startswith(("input_", "dice_")) for key in first)
    # where the label sits: the lesion voxel in the corner, the organ's rows 0-1 (centroid row
    # 0.5, column 1.5) of a 4x4 patch whose centre is (1.5, 1.5)
    assert first["offset_2"] == pytest.approx(np.hypot(1.5, 1.5))
    assert first["offset_1"] == pytest.approx(1.0)
    assert first["border_2"] == 1.0 and first["border_1"] == 1.0  # a 4x4 patch is all border
    assert second["offset_2"] is None and second["border_2"] is None


def test_the_border_share_counts_only_voxels_near_the_edge() -> None:
    mask = np.zeros((8, 8), dtype=bool)
    mask[3:5, 3:5] = True  # 4 voxels in the middle
    mask[0, 0] = True  # 1 voxel on the edge
    (row,) = cb.sample_rows(np.ones((1, 1, 8, 8)), mask[None, None].astype(np.int16), [1], False)
    assert row["border_1"] == pytest.approx(1 / 5)


def test_the_comparison_drops_missing_dice_and_finds_a_shifted_distribution() -> None:
    rng = np.random.default_rng(0)
    same = [{"x": float(v), "d": None if v < 0 else float(v)} for v in rng.normal(size=400)]
    shifted = [{"x": float(v) + 1.0, "d": float(v)} for v in rng.normal(size=400)]
    table = {row["statistic"]: row for row in cb.compare(shifted, same)}
    assert table["x"]["difference"] == pytest.approx(1.0, abs=0.2)
    assert table["x"]["ks_p"] < 1e-6
    assert table["d"]["n"][1] < 400 and table["d"]["n"][0] == 400
    alike = {row["statistic"]: row for row in cb.compare(same, same)}
    assert alike["x"]["ks_p"] == 1.0 and alike["x"]["difference"] == 0.0
    assert "statistic" in cb.format_table(cb.compare(shifted, same)).splitlines()[0]


def test_case_frequencies_count_each_sides_draws_and_test_them() -> None:
    ours = [{"case": c} for c in ["a"] * 50 + ["b"] * 50]
    even = [{"case": c} for c in ["a"] * 48 + ["b"] * 52]
    skewed = [{"case": c} for c in ["a"] * 90 + ["b"] * 10]
    alike = cb.case_frequencies(ours, even)
    assert alike["cases"] == ["a", "b"] and alike["ours"] == [50, 50]
    assert alike["upstream"] == [48, 52]
    assert alike["chi2_p"] > 0.5
    assert cb.case_frequencies(ours, skewed)["chi2_p"] < 1e-6
    # the case name is not a statistic: the comparison of means leaves it out
    rows = [{"case": "a", "x": 1.0}, {"case": "b", "x": 2.0}]
    assert [row["statistic"] for row in cb.compare(rows, rows)] == ["x"]
