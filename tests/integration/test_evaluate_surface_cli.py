"""``nnunet-core evaluate --surface-metrics``: HD95 and NSD in summary.json, in mm of the files.

Two cases written as NIfTI with an anisotropic spacing: a sphere shifted by 2 voxels along the
3 mm axis (6 mm; hand values HD95 = 0.95 * 6, NSD(tol) = tol / 6 within a voxel, as in
tests/unit/evaluation/test_surface_metrics.py), and a case whose prediction misses the lesion
(the worst case, named).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from tests.helpers.surface import ball

SPACING_ZYX = (3.0, 1.0, 1.0)
SHAPE = (24, 48, 48)


def write(path: Path, array: np.ndarray) -> None:
    image = sitk.GetImageFromArray(array.astype(np.uint8))
    image.SetSpacing(tuple(reversed(SPACING_ZYX)))
    sitk.WriteImage(image, str(path))


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    references, predictions = tmp_path / "ref", tmp_path / "pred"
    references.mkdir()
    predictions.mkdir()
    organ = ball(SHAPE, SPACING_ZYX, (36, 24, 24), 15).astype(np.uint8)
    shifted = ball(SHAPE, SPACING_ZYX, (42, 24, 24), 15).astype(np.uint8)
    write(references / "a.nii.gz", organ)
    write(predictions / "a.nii.gz", shifted)
    with_lesion = organ.copy()
    with_lesion[10:12, 30:33, 30:33] = 2
    write(references / "b.nii.gz", with_lesion)
    write(predictions / "b.nii.gz", organ)
    dataset = {
        "channel_names": {"0": "CT"},
        "labels": {"background": 0, "organ": 1, "lesion": 2},
        "numTraining": 2,
        "file_ending": ".nii.gz",
    }
    dataset_json = tmp_path / "dataset.json"
    dataset_json.write_text(json.dumps(dataset))
    return references, predictions, dataset_json


def evaluate(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnunet_core", "evaluate", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_summary_holds_hd95_and_nsd_per_case_label_and_mean(folders, tmp_path: Path) -> None:
    references, predictions, dataset_json = folders
    out = tmp_path / "summary.json"
    result = evaluate(str(references), str(predictions), "-djfile", str(dataset_json), "-o",
                      str(out), "--surface-metrics", "--nsd-tolerance", "3", "2=1")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "HD95" in result.stdout and "NSD" in result.stdout
    summary = json.loads(out.read_text())
    case_a, case_b = summary["metric_per_case"]
    shifted = case_a["metrics"]["1"]
    assert shifted["HD95"] == pytest.approx(0.95 * 6, abs=3.0)  # one voxel along z: 3 mm
    assert 1.5 / 6 <= shifted["NSD"] <= 4.5 / 6  # tolerance 3 mm -+ half a voxel
    assert case_a["metrics"]["2"] == {**case_a["metrics"]["2"], "HD95": 0.0, "NSD": 1.0}
    missed = case_b["metrics"]["2"]
    diagonal = math.sqrt(sum(((n - 1) * s) ** 2 for n, s in zip(SHAPE, SPACING_ZYX, strict=True)))
    assert missed["surface_empty"] == "prediction" and missed["NSD"] == 0.0
    assert missed["HD95"] == pytest.approx(diagonal)
    assert summary["mean"]["2"]["NSD"] == pytest.approx(0.5)  # 1 (both empty) and 0 (missed)
    assert summary["mean"]["1"]["HD95"] == pytest.approx(shifted["HD95"] / 2)
    assert "HD95" in summary["foreground_mean"]


def test_without_the_flag_the_summary_is_upstreams(folders, tmp_path: Path) -> None:
    references, predictions, dataset_json = folders
    out = tmp_path / "summary.json"
    result = evaluate(
        str(references), str(predictions), "-djfile", str(dataset_json), "-o", str(out)
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(out.read_text())
    assert set(summary["mean"]["1"]) == {"Dice", "IoU", "FP", "TP", "FN", "TN", "n_pred", "n_ref"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--surface-metrics", "--nsd-tolerance", "-1"], "positive number"),
        (["--surface-metrics", "--nsd-tolerance", "2=x"], "'2=x'"),
        (["--nsd-tolerance", "2"], "needs --surface-metrics"),
        # a key that is no label of the dataset would silently get the default tolerance
        (["--surface-metrics", "--nsd-tolerance", "7=2"], "'7': the dataset has no such label"),
    ],
)
def test_a_bad_tolerance_is_one_line_and_exit_2(folders, tmp_path, flags, message) -> None:
    references, predictions, dataset_json = folders
    out = tmp_path / "summary.json"
    result = evaluate(str(references), str(predictions), "-djfile", str(dataset_json), "-o",
                      str(out), *flags)  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not out.exists()
