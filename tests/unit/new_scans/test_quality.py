"""The prediction mode's quality control: volumes, flags, the two tables, the records a rerun
keeps, the training volume ranges and the pictures (nnunet_core/new_scans)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from PIL import Image

from nnunet_core.io.dataset_json import parse_labels
from nnunet_core.layout.new_scans import case_record_path, failure_record_path
from nnunet_core.new_scans import montage
from nnunet_core.new_scans.montage import case_slice, write_case_png, write_montage
from nnunet_core.new_scans.quality import (
    case_figures,
    flags,
    read_records,
    write_failed,
    write_summary,
)
from nnunet_core.new_scans.training_volumes import training_volume_ranges

LABELS = parse_labels({"labels": {"background": 0, "liver": 1, "tumour": 2}})
REGIONS = parse_labels(
    {"labels": {"background": 0, "whole": [1, 2], "core": [2]}, "regions_class_order": [1, 2]}
)


def test_case_figures_give_each_label_volume_in_ml() -> None:
    seg = np.zeros((1, 4, 5, 6), dtype=np.uint8)  # the readers' (1, z, y, x)
    seg[0, 0, :2, :5] = 1  # 10 voxels
    seg[0, 3, 0, :3] = 2  # 3 voxels
    figures = case_figures(seg, [2.0, 1.5, 1.0], LABELS)  # 3 mm^3 a voxel
    assert figures["shape"] == [4, 5, 6]
    assert figures["spacing"] == [2.0, 1.5, 1.0]
    assert figures["volumes_ml"] == pytest.approx({"liver": 0.03, "tumour": 0.009})


def test_a_region_counts_every_label_inside_it() -> None:
    """The export paints 'core' (2) over 'whole' (1): 'whole' is both values."""
    seg = np.zeros((2, 3, 4), dtype=np.uint8)
    seg[0, 0, :] = 1
    seg[1, 0, :2] = 2
    volumes = case_figures(seg, [10.0, 10.0, 10.0], REGIONS)["volumes_ml"]
    assert volumes == pytest.approx({"whole": 6.0, "core": 2.0})


def test_a_2d_image_leaves_out_the_readers_placeholder_spacing() -> None:
    seg = np.ones((1, 4, 4), dtype=np.uint8)
    volumes = case_figures(seg, [999 * 0.5, 0.5, 0.5], LABELS)["volumes_ml"]
    assert volumes == pytest.approx({"liver": 16 * 0.25 / 1000, "tumour": 0.0})


def test_flags() -> None:
    ranges = {"liver": (1.0, 2.0), "tumour": (0.0, 0.5)}
    assert flags({"liver": 0.0, "tumour": 0.0}, None) == ["empty"]
    assert flags({"liver": 0.0, "tumour": 0.0}, ranges) == ["empty", "liver_below_training"]
    assert flags({"liver": 3.0, "tumour": 0.2}, ranges) == ["liver_above_training"]
    assert flags({"liver": 1.5, "tumour": 0.7}, ranges) == ["tumour_above_training"]
    assert flags({"liver": 1.0, "tumour": 0.5}, ranges) == []
    assert flags({"liver": 5.0, "tumour": 0.0}, {"tumour": (0.1, 1.0)}) == ["tumour_below_training"]


def _record(case: str, key: str = "k1", **extra: object) -> dict:
    return {
        "case": case,
        "key": key,
        "shape": [64, 128, 128],
        "spacing": [3.0, 0.78125, 0.78125],
        "seconds": 12.3456,
        "volumes_ml": {"liver": 1234.56789, "tumour": 0.0},
        "flags": [],
        "segmentation": f"{case}.nii.gz",
        **extra,
    }


def test_summary_has_a_row_per_case_sorted(tmp_path: Path) -> None:
    records = [_record("b", flags=["empty", "liver_below_training"]), _record("a")]
    path = write_summary(tmp_path, records)
    assert path == tmp_path / "summary.tsv"
    lines = path.read_text().splitlines()
    assert lines == [
        "case\tshape\tspacing\tseconds\tliver_ml\ttumour_ml\tflags",
        "a\t64x128x128\t3x0.7812x0.7812\t12.35\t1234.568\t0\t",
        "b\t64x128x128\t3x0.7812x0.7812\t12.35\t1234.568\t0\tempty,liver_below_training",
    ]


def test_failed_tsv_is_written_and_removed_when_nothing_failed(tmp_path: Path) -> None:
    failures = [
        {"case": "z", "key": "k1", "reason": "unreadable\timage\n(truncated)"},
        {"case": "c", "key": "k1", "reason": "out of memory"},
    ]
    path = write_failed(tmp_path, failures)
    assert path == tmp_path / "failed.tsv"
    assert path.read_text().splitlines() == [
        "case\treason",
        "c\tout of memory",
        "z\tunreadable image (truncated)",
    ]
    assert write_failed(tmp_path, []) is None
    assert not path.exists()


def test_records_of_another_key_or_unreadable_are_ignored(tmp_path: Path) -> None:
    for record in (_record("b"), _record("a"), _record("old", key="k0")):
        path = case_record_path(tmp_path, record["case"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record))
    case_record_path(tmp_path, "broken").write_text("{not json")
    case_record_path(tmp_path, "list").write_text("[1, 2]")
    failed = failure_record_path(tmp_path, "c")
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps({"case": "c", "key": "k1", "reason": "x"}))
    failure_record_path(tmp_path, "d").write_text(json.dumps({"case": "d", "key": "k0"}))
    cases, failures = read_records(tmp_path, "k1")
    assert [r["case"] for r in cases] == ["a", "b"]
    assert failures == [{"case": "c", "key": "k1", "reason": "x"}]
    assert read_records(tmp_path / "nothing", "k1") == ([], [])


def _model_folder(root: Path, metrics: list[dict], spacing: list[float]) -> Path:
    model = root / "Trainer__Plans__3d_fullres"
    validation = model / "fold_0" / "validation"
    validation.mkdir(parents=True)
    (model / "plans.json").write_text(json.dumps({"original_median_spacing_after_transp": spacing}))
    summary = {"foreground_mean": {}, "mean": {}, "metric_per_case": metrics}
    (validation / "summary.json").write_text(json.dumps(summary))
    return model


def _case(name: str, counts: dict[str, int]) -> dict:
    return {
        "metrics": {k: {"Dice": 1.0, "n_ref": n, "n_pred": n} for k, n in counts.items()},
        "prediction_file": f"/where/it/trained/fold_0/validation/{name}.nii.gz",
        "reference_file": f"/where/it/trained/gt_segmentations/{name}.nii.gz",
    }


def _rounded(ranges: dict[str, tuple[float, float]] | None) -> dict:
    assert ranges is not None
    return {name: (round(low, 9), round(high, 9)) for name, (low, high) in ranges.items()}


def test_training_ranges_from_headers_and_else_the_plans(tmp_path: Path) -> None:
    """Case a's prediction is in the validation folder (voxel 4 mm^3 by its header); case b's is
    not, so the plans' median spacing (2 mm^3) stands in for its geometry."""
    metrics = [_case("a", {"1": 1000, "2": 10}), _case("b", {"1": 4000, "2": 0})]
    model = _model_folder(tmp_path, metrics, [2.0, 1.0, 1.0])
    image = sitk.GetImageFromArray(np.zeros((2, 3, 4), dtype=np.uint8))
    image.SetSpacing((1.0, 2.0, 2.0))
    sitk.WriteImage(image, str(model / "fold_0" / "validation" / "a.nii.gz"))
    ranges = training_volume_ranges([model], LABELS)
    assert _rounded(ranges) == {"liver": (4.0, 8.0), "tumour": (0.0, 0.04)}

    (model / "fold_0" / "validation" / "a.nii.gz").unlink()
    ranges = training_volume_ranges([model], LABELS)
    assert _rounded(ranges) == {"liver": (2.0, 8.0), "tumour": (0.0, 0.02)}


def test_training_ranges_of_regions_and_without_a_summary(tmp_path: Path) -> None:
    metrics = [_case("a", {"(1, 2)": 3000, "(2,)": 500})]
    model = _model_folder(tmp_path, metrics, [1.0, 1.0, 1.0])
    ranges = training_volume_ranges([model], REGIONS)
    assert _rounded(ranges) == {"whole": (3.0, 3.0), "core": (0.5, 0.5)}
    (model / "fold_0" / "validation" / "summary.json").unlink()
    assert training_volume_ranges([model], REGIONS) is None


def test_case_slice_is_the_largest_foreground_or_the_middle() -> None:
    seg = np.zeros((5, 3, 3), dtype=np.uint8)
    assert case_slice(seg) == 2
    seg[4, 0, 0] = 1
    assert case_slice(seg) == 4


def test_case_png_shows_the_labelled_slice(tmp_path: Path) -> None:
    voxels = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    labels = np.zeros((5, 6, 7), dtype=np.uint8)
    labels[3, 2:4, 2:5] = 2
    sitk.WriteImage(sitk.GetImageFromArray(voxels), str(tmp_path / "case_0000.nii.gz"))
    sitk.WriteImage(sitk.GetImageFromArray(labels), str(tmp_path / "case.nii.gz"))
    png = write_case_png(
        tmp_path / "case_0000.nii.gz",
        tmp_path / "case.nii.gz",
        tmp_path / "case.png",
        "SimpleITKIO",
    )
    rgb = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert rgb.shape == (6, 7, 3)
    assert len(set(rgb[3, 3])) > 1  # a labelled pixel is coloured
    assert len(set(rgb[0, 0])) == 1  # the rest is grey


def _png(path: Path, height: int, width: int) -> Path:
    Image.fromarray(np.full((height, width, 3), 200, dtype=np.uint8)).save(path)
    return path


def test_montage_tiles_pads_and_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pngs = [_png(tmp_path / "c.png", 10, 12), _png(tmp_path / "a.png", 8, 8)]
    pngs.append(_png(tmp_path / "b.png", 10, 12))
    gap, name = montage.GAP, montage.NAME_HEIGHT
    out = write_montage(pngs, tmp_path / "qc" / "montage.png", columns=2)
    with Image.open(out) as picture:
        assert picture.size == (2 * (12 + gap) - gap, 2 * (10 + name + gap) - gap)
        rgb = np.asarray(picture.convert("RGB"))
    assert rgb[0, 0].tolist() == [200, 200, 200]  # case a first
    assert rgb[9, 9].tolist() == list(montage.BACKGROUND)  # its 8x8 padded to 10x12
    monkeypatch.setattr(montage, "MAX_TILES", 2)
    with Image.open(write_montage(pngs, tmp_path / "capped.png", columns=6)) as picture:
        assert picture.size == (2 * (12 + gap) - gap, name + gap + 10 + name)
