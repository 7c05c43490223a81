"""Keep-largest-component postprocessing: accepted when it helps, rejected when it hurts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.postprocessing import (
    KEEP_LARGEST,
    apply_postprocessing_to_folder,
    determine_postprocessing,
    keep_largest_component,
    load_postprocessing,
)
from nnunet_core.io.dataset_json import parse_dataset_json
from tests.helpers.fake_results import DATASET_JSON, SHAPE, read_seg_file, write_seg_file

SPURIOUS_1 = (slice(4, 6), slice(8, 10), slice(0, 2))  # 8 voxels, apart from everything
EXTRA_2 = (5, 8, slice(8, 10))  # 2 voxels, apart from everything


def touching() -> np.ndarray:
    """Label 1 (48 voxels) and label 2 (24 voxels) boxes that touch: one foreground component."""
    seg = np.zeros(SHAPE, dtype=np.uint8)
    seg[1:4, 1:5, 1:5] = 1
    seg[1:4, 1:5, 5:7] = 2
    return seg


def folders(tmp_path: Path, pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[Path, Path]:
    gt_dir, pred_dir = tmp_path / "gt", tmp_path / "pred"
    for i, (gt, pred) in enumerate(pairs):
        write_seg_file(gt_dir / f"case_{i}.nii.gz", gt)
        write_seg_file(pred_dir / f"case_{i}.nii.gz", pred)
    return gt_dir, pred_dir


def dataset_json(**labels: int) -> object:
    content = {**DATASET_JSON, "labels": {"background": 0, **(labels or {"a": 1, "b": 2})}}
    return parse_dataset_json(content)


def test_keep_largest_component_uses_full_connectivity_and_keeps_ties() -> None:
    seg = np.zeros((6, 6, 6), dtype=np.uint8)
    seg[0, 0, 0] = seg[1, 1, 1] = 1  # diagonal neighbours: one component of 2
    seg[4, 4, 4] = 1  # a single voxel
    seg[3, 0, 5] = 2
    result = keep_largest_component(seg, 1)
    assert result[0, 0, 0] == result[1, 1, 1] == 1 and result[4, 4, 4] == 0
    assert result[3, 0, 5] == 2 and seg[4, 4, 4] == 1  # other labels and the input untouched
    seg[4, 4, 5] = 1  # now two components of 2 voxels: both kept
    assert np.array_equal(keep_largest_component(seg, 1), seg)


def test_keep_largest_component_of_several_labels_treats_them_as_one() -> None:
    seg = touching()
    seg[EXTRA_2] = 2
    result = keep_largest_component(seg, [1, 2])
    assert np.array_equal(result, touching())
    assert np.array_equal(keep_largest_component(seg, (1, 2)), result)  # a region is the same union


def test_foreground_step_removes_a_spurious_blob_when_it_helps(tmp_path: Path) -> None:
    pairs = []
    for i in range(3):
        pred = touching()
        if i != 1:
            pred[SPURIOUS_1] = 1 if i == 0 else 2  # a false blob of label 1 or of label 2
        pairs.append((touching(), pred))
    gt_dir, pred_dir = folders(tmp_path, pairs)
    result = determine_postprocessing(pred_dir, gt_dir, dataset_json(), num_processes=1)
    assert result["postprocessing_fns"] == [KEEP_LARGEST]
    assert result["postprocessing_kwargs"] == [{"labels_or_regions": [1, 2]}]
    assert result["postprocessed"]["foreground_mean"]["Dice"] == 1.0
    assert result["input_folder"]["foreground_mean"]["Dice"] < 1.0
    assert [s["accepted"] for s in result["steps_tried"]] == [True, False, False]
    for i in range(3):
        assert np.array_equal(
            read_seg_file(pred_dir / f"postprocessed/case_{i}.nii.gz"), touching()
        )
    assert not (pred_dir / "postprocessed/temp").exists()
    on_disk = json.loads((pred_dir / "postprocessing.json").read_text())
    assert load_postprocessing(pred_dir / "postprocessing.json") == [
        {"function": KEEP_LARGEST, "labels_or_regions": [1, 2]}
    ]
    assert on_disk["postprocessed"]["mean"]["1"]["Dice"] == 1.0


def test_nothing_is_applied_when_it_hurts(tmp_path: Path) -> None:
    gt = touching()
    gt[SPURIOUS_1] = 1  # the second component is real
    gt_dir, pred_dir = folders(tmp_path, [(gt, gt.copy())])
    result = determine_postprocessing(pred_dir, gt_dir, dataset_json())
    assert result["postprocessing_fns"] == [] and result["postprocessing_kwargs"] == []
    assert [s["accepted"] for s in result["steps_tried"]] == [False, False, False]
    assert result["steps_tried"][0]["foreground_mean_dice_after"] < 1.0
    assert np.array_equal(read_seg_file(pred_dir / "postprocessed/case_0.nii.gz"), gt)


def test_foreground_step_is_rejected_if_one_class_drops_then_per_class_decides(
    tmp_path: Path,
) -> None:
    gt = touching()
    gt[EXTRA_2] = 2  # a real, separate piece of label 2
    pred = gt.copy()
    pred[SPURIOUS_1] = 1  # a false piece of label 1
    gt_dir, pred_dir = folders(tmp_path, [(gt, pred)])
    result = determine_postprocessing(pred_dir, gt_dir, dataset_json())
    fg, label1, label2 = result["steps_tried"]
    # foreground-mean rises ((1 + 48/50)/2 > (96/104 + 1)/2) but label 2 falls: rejected
    assert fg["foreground_mean_dice_after"] > fg["foreground_mean_dice_before"]
    assert not fg["accepted"] and label1["accepted"] and not label2["accepted"]
    assert label1["dice_before"] == pytest.approx(96 / 104) and label1["dice_after"] == 1.0
    assert label2["dice_after"] == pytest.approx(48 / 50)
    assert result["postprocessing_kwargs"] == [{"labels_or_regions": 1}]
    assert np.array_equal(read_seg_file(pred_dir / "postprocessed/case_0.nii.gz"), gt)


def test_a_class_absent_everywhere_makes_the_foreground_mean_nan_as_upstream(
    tmp_path: Path,
) -> None:
    pred = touching()
    pred[SPURIOUS_1] = 1
    gt_dir, pred_dir = folders(tmp_path, [(touching(), pred)])
    result = determine_postprocessing(pred_dir, gt_dir, dataset_json(a=1, b=2, c=3))
    # NaN > NaN is false: the all-foreground step cannot be accepted; per class still can
    assert [s["accepted"] for s in result["steps_tried"]] == [False, True, False, False]
    assert result["postprocessing_kwargs"] == [{"labels_or_regions": 1}]


def test_apply_replays_the_steps_on_another_folder(tmp_path: Path) -> None:
    pred = touching()
    pred[SPURIOUS_1] = 2
    pred[EXTRA_2] = 1
    _, pred_dir = folders(tmp_path, [(touching(), pred)])
    pp_file = tmp_path / "postprocessing.json"
    upstream_style = {
        "postprocessing_fns": [KEEP_LARGEST] * 2,
        "postprocessing_kwargs": [{"labels_or_regions": [[1, 2]]}, {"labels_or_regions": 2}],
    }
    pp_file.write_text(json.dumps(upstream_style))
    steps = load_postprocessing(pp_file)
    cases = apply_postprocessing_to_folder(pred_dir, tmp_path / "out", steps, ".nii.gz")
    assert cases == ["case_0"]
    assert np.array_equal(read_seg_file(tmp_path / "out/case_0.nii.gz"), touching())


def test_load_postprocessing_refuses_pickles_and_names_the_producer(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="pickles are not read"):
        load_postprocessing(tmp_path / "postprocessing.pkl")
    with pytest.raises(DatasetError, match="find-best-config"):
        load_postprocessing(tmp_path / "postprocessing.json")


def test_regions_are_decided_per_region_with_upstream_keys(tmp_path: Path) -> None:
    content = {
        **DATASET_JSON,
        "labels": {"background": 0, "whole": [1, 2], "core": 2},
        "regions_class_order": [1, 2],
    }
    pred = touching()
    pred[SPURIOUS_1] = 2  # false core, hence also false whole
    gt_dir, pred_dir = folders(tmp_path, [(touching(), pred)])
    result = determine_postprocessing(pred_dir, gt_dir, parse_dataset_json(content))
    assert [s["scope"] for s in result["steps_tried"]] == ["all foreground", "(1, 2)", "2"]
    assert result["postprocessing_kwargs"] == [{"labels_or_regions": [1, 2]}]  # the labels
    assert set(result["postprocessed"]["mean"]) == {"(1, 2)", "2"}
    assert np.array_equal(read_seg_file(pred_dir / "postprocessed/case_0.nii.gz"), touching())
