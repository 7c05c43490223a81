"""Metrics against hand-computed examples, and the summary.json of a folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.metrics import (
    classes_from_dataset_json,
    compute_metrics,
    compute_metrics_on_folder,
    confusion_counts,
    labels_or_regions,
    metrics_from_counts,
)
from nnunet_core.io.dataset_json import parse_dataset_json, parse_labels

REF = np.array([[0, 1, 1, 2], [2, 2, 0, 0]])
PRED = np.array([[0, 1, 2, 2], [2, 0, 0, 1]])
LABELS = parse_labels({"labels": {"background": 0, "a": 1, "b": 2, "c": 3}})


def test_counts_and_scores_by_hand() -> None:
    result = compute_metrics(REF, PRED, [1, 2, 3])
    # label 1: ref {(0,1),(0,2)}, pred {(0,1),(1,3)}
    assert result[1] == {
        "Dice": 0.5,
        "IoU": 1 / 3,
        "FP": 1,
        "TP": 1,
        "FN": 1,
        "TN": 5,
        "n_pred": 2,
        "n_ref": 2,
    }
    # label 2: ref {(0,3),(1,0),(1,1)}, pred {(0,2),(0,3),(1,0)}
    assert result[2]["TP"] == 2 and result[2]["FP"] == 1 and result[2]["FN"] == 1
    assert result[2]["Dice"] == pytest.approx(2 / 3) and result[2]["IoU"] == 0.5
    # label 3 is absent from both: NaN, not 0 or 1
    assert math.isnan(result[3]["Dice"]) and math.isnan(result[3]["IoU"])
    assert result[3]["TN"] == 8


def test_ignore_label_voxels_are_not_counted() -> None:
    ref = np.array([0, 1, 1, 2, 2])
    pred = np.array([1, 1, 0, 1, 0])
    ignore = ref == 2
    assert confusion_counts(ref == 1, pred == 1, ignore) == (1, 1, 1, 0)
    spec = parse_labels({"labels": {"background": 0, "a": 1, "ignore": 2}})
    assert labels_or_regions(spec) == [1]
    result = compute_metrics(ref, pred, labels_or_regions(spec), spec.ignore_label)
    assert result[1]["Dice"] == 0.5 and result[1]["TN"] == 0


def test_regions_are_unions_of_labels() -> None:
    spec = parse_labels(
        {"labels": {"background": 0, "whole": [1, 2], "core": [2]}, "regions_class_order": [1, 2]}
    )
    ref = np.array([0, 1, 2, 2])
    pred = np.array([1, 2, 2, 0])
    result = compute_metrics(ref, pred, labels_or_regions(spec))
    assert set(result) == {(1, 2), (2,)}
    assert (result[(1, 2)]["TP"], result[(1, 2)]["FP"], result[(1, 2)]["FN"]) == (2, 1, 1)
    assert (result[(2,)]["TP"], result[(2,)]["FP"], result[(2,)]["FN"], result[(2,)]["TN"]) == (
        1,
        1,
        1,
        1,
    )


def test_region_keys_follow_dataset_json_types() -> None:
    dataset_json = parse_dataset_json(
        {
            "channel_names": {"0": "MR"},
            "labels": {"background": 0, "whole": [1, 2, 3], "core": [2, 3], "enh": 3},
            "regions_class_order": [1, 2, 3],
            "numTraining": 0,
            "file_ending": ".nii.gz",
        }
    )
    assert classes_from_dataset_json(dataset_json) == [(1, 2, 3), (2, 3), 3]


def test_metrics_from_counts_formulas() -> None:
    m = metrics_from_counts(tp=3, fp=2, fn=1, tn=10)
    assert m["Dice"] == 6 / 9 and m["IoU"] == 3 / 6 and m["n_pred"] == 5 and m["n_ref"] == 4


def _write(folder: Path, name: str, array: np.ndarray) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(sitk.GetImageFromArray(array.astype(np.uint8)[None]), str(folder / name))


def test_folder_summary_structure_and_means(tmp_path: Path) -> None:
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    _write(gt, "a.nii.gz", REF)
    _write(pred, "a.nii.gz", PRED)
    # case b: label 2 absent from both (NaN), label 1 perfect, label 3 never present anywhere
    _write(gt, "b.nii.gz", np.array([[1, 1, 0, 0], [0, 0, 0, 0]]))
    _write(pred, "b.nii.gz", np.array([[1, 1, 0, 0], [0, 0, 0, 0]]))
    output = tmp_path / "pred" / "summary.json"
    summary = compute_metrics_on_folder(
        gt, pred, ".nii.gz", LABELS, num_processes=2, output_file=output
    )
    cases = summary["metric_per_case"]
    assert [Path(c["prediction_file"]).name for c in cases] == ["a.nii.gz", "b.nii.gz"]
    assert cases[0]["reference_file"] == str(gt / "a.nii.gz")
    assert summary["mean"][1]["Dice"] == pytest.approx((0.5 + 1.0) / 2)
    assert summary["mean"][2]["Dice"] == pytest.approx(2 / 3)  # nanmean skips case b
    assert math.isnan(summary["mean"][3]["Dice"])
    assert summary["mean"][1]["TP"] == pytest.approx((1 + 2) / 2)
    # foreground_mean is a plain mean over labels: label 3 (NaN everywhere) makes it NaN
    assert math.isnan(summary["foreground_mean"]["Dice"])
    assert summary["foreground_mean"]["TP"] == pytest.approx((1.5 + 2 / 2 + 0) / 3)

    text = output.read_text()
    assert text.index('"foreground_mean"') < text.index('"mean"') < text.index('"metric_per_case"')
    loaded = json.loads(text)  # NaN is written as NaN, as upstream's json does
    assert set(loaded["mean"]) == {"1", "2", "3"}
    assert loaded["metric_per_case"][1]["metrics"]["1"]["Dice"] == 1.0
    assert math.isnan(loaded["metric_per_case"][1]["metrics"]["2"]["Dice"])


def test_foreground_mean_without_absent_labels(tmp_path: Path) -> None:
    spec = parse_labels({"labels": {"background": 0, "a": 1, "b": 2}})
    _write(tmp_path / "gt", "a.nii.gz", REF)
    _write(tmp_path / "pred", "a.nii.gz", PRED)
    summary = compute_metrics_on_folder(tmp_path / "gt", tmp_path / "pred", ".nii.gz", spec, 1)
    assert summary["foreground_mean"]["Dice"] == pytest.approx((0.5 + 2 / 3) / 2)


def test_missing_prediction_names_the_case(tmp_path: Path) -> None:
    for name in ("a.nii.gz", "b.nii.gz"):
        _write(tmp_path / "gt", name, REF)
    _write(tmp_path / "pred", "a.nii.gz", PRED)
    with pytest.raises(DatasetError, match="missing prediction for case.* b "):
        compute_metrics_on_folder(tmp_path / "gt", tmp_path / "pred", ".nii.gz", LABELS, 1)
    # chill (cross-validation folds): only the predicted cases are evaluated
    summary = compute_metrics_on_folder(
        tmp_path / "gt", tmp_path / "pred", ".nii.gz", LABELS, 1, chill=True
    )
    assert len(summary["metric_per_case"]) == 1


def test_shape_mismatch_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "gt", "a.nii.gz", REF)
    _write(tmp_path / "pred", "a.nii.gz", REF[:, :3])
    with pytest.raises(DatasetError, match="differs from the reference"):
        compute_metrics_on_folder(tmp_path / "gt", tmp_path / "pred", ".nii.gz", LABELS, 1)
