"""Broken test images, test labels, prediction inputs, evaluation files and unverified data.

Each case breaks one file of a tiny synthetic dataset (the real generator) the way disks and
converters do (a truncated gzip, NaN/inf voxels, a wrong channel count, a cropped label) and runs
the real command line as a user would: exit code 2, one stderr line that names the file, and
nothing written (no verify.json, fingerprint, prediction or summary). One real Snakemake run
shows that a broken test image stops the workflow at the integrity check, before training.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from tests.helpers.model_folder import make_model
from tests.helpers.workflow import snakemake, tiny_config

DATASET = "Dataset900_Synth"
TINY = {"num_training": 4, "num_test": 2, "shape": (8, 16, 16)}
TEST_IMAGE = "imagesTs/synth_t001_0000.nii.gz"
TEST_LABEL = "labelsTs/synth_t001.nii.gz"
TRAIN_IMAGE = "imagesTr/synth_002_0000.nii.gz"


@pytest.fixture
def roots(tmp_path: Path, make_raw_dataset) -> Path:
    """``raw/``, ``pre/``, ``results/`` under one folder; the raw dataset is a fresh copy."""
    make_raw_dataset(tmp_path / "raw" / DATASET, **TINY)
    return tmp_path


def raw(roots: Path) -> Path:
    return roots / "raw" / DATASET


def pre(roots: Path) -> Path:
    return roots / "pre" / DATASET


def cli(roots: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "nnUNet_raw": str(roots / "raw"),
        "nnUNet_preprocessed": str(roots / "pre"),
        "nnUNet_results": str(roots / "results"),
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "nnunet_core", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess, command: str, *needles: str) -> str:
    """Exit 2 and exactly one stderr line, ``nnunet-core COMMAND: error: ...`` with ``needles``."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"nnunet-core {command}: error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------- ways to break one file


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # ITK alone would read the rest as zeros


def rewrite(path: Path, change: Callable[[np.ndarray], np.ndarray], keep_geometry=True) -> None:
    image = sitk.ReadImage(str(path))
    out = sitk.GetImageFromArray(np.ascontiguousarray(change(sitk.GetArrayFromImage(image))))
    if keep_geometry:
        out.CopyInformation(image)
    else:
        out.SetSpacing(image.GetSpacing())
        out.SetOrigin(image.GetOrigin())
        out.SetDirection(image.GetDirection())
    sitk.WriteImage(out, str(path), useCompression=True)


def poison(value: float) -> Callable[[Path], None]:
    def change(path: Path) -> None:
        def put(array: np.ndarray) -> np.ndarray:
            array = array.astype(np.float32)
            array[1, 2, 3] = value
            return array

        rewrite(path, put)

    return change


def crop(path: Path) -> None:
    rewrite(path, lambda a: a[:, :, :-1], keep_geometry=False)


def to_2d(path: Path) -> None:
    image = sitk.ReadImage(str(path))
    sitk.WriteImage(sitk.GetImageFromArray(sitk.GetArrayFromImage(image)[3]), str(path))


def to_2d_test_case(image: Path) -> None:
    """A consistent 2-D test case (image and label) among 3-D training cases."""
    to_2d(image)
    to_2d(image.parent.parent / TEST_LABEL)


def extra_channel(path: Path) -> None:
    shutil.copy(path, path.with_name(path.name.replace("_0000", "_0001")))


# ---------------------------------------------------------------- verify: test images and labels

TEST_SET_CASES = {
    "truncated_imagesTs": (
        TEST_IMAGE,
        truncate,
        ["case synth_t001", TEST_IMAGE, "unreadable or corrupt", "truncated"],
    ),
    "nan_imagesTs": (TEST_IMAGE, poison(np.nan), [TEST_IMAGE, "1 NaN/inf voxel(s)"]),
    "inf_imagesTs": (TEST_IMAGE, poison(np.inf), [TEST_IMAGE, "1 NaN/inf voxel(s)"]),
    "wrong_channel_count_imagesTs": (
        TEST_IMAGE,
        extra_channel,
        ["imagesTs/synth_t001_0001.nii.gz", "channel 1", "declares 1 channel(s)"],
    ),
    "2d_imagesTs_among_3d": (
        TEST_IMAGE,
        to_2d_test_case,
        [TEST_IMAGE, "2-D image", "the 4 training case(s) are 3-D"],
    ),
    "truncated_labelsTs": (
        TEST_LABEL,
        truncate,
        ["case synth_t001", TEST_LABEL, "unreadable or corrupt", "truncated"],
    ),
    "labelsTs_shape_mismatch": (
        TEST_LABEL,
        crop,
        ["case synth_t001", f"of {TEST_LABEL} differs from", TEST_IMAGE, "shape"],
    ),
}


@pytest.mark.parametrize("case", list(TEST_SET_CASES))
def test_verify_refuses_a_broken_test_case(roots: Path, case: str) -> None:
    name, breaks, needles = TEST_SET_CASES[case]
    breaks(raw(roots) / name)
    result = cli(roots, "verify", "-d", "900", "-np", "2")
    one_error_line(result, "verify", *needles)
    assert not (pre(roots) / "verify.json").exists()


def test_good_test_set_is_checked_and_counted(roots: Path) -> None:
    result = cli(roots, "verify", "-d", "900", "-np", "2")
    assert result.returncode == 0, result.stderr
    assert "4 case(s) + 2 test case(s) OK" in result.stdout
    report = json.loads((pre(roots) / "verify.json").read_text())
    assert (report["test_cases_checked"], report["test_labels_checked"]) == (2, 2)


def test_failed_verify_removes_the_older_report(roots: Path) -> None:
    assert cli(roots, "verify", "-d", "900", "-np", "1").returncode == 0
    assert (pre(roots) / "verify.json").is_file()
    truncate(raw(roots) / TEST_IMAGE)
    one_error_line(cli(roots, "verify", "-d", "900", "-np", "1"), "verify", TEST_IMAGE)
    assert not (pre(roots) / "verify.json").exists()


# ---------------------------------------------------------------- fingerprint/plan/preprocess

STANDALONE_CASES = {
    "truncated": (truncate, [TRAIN_IMAGE, "unreadable or corrupt", "truncated"]),
    "nan": (poison(np.nan), [TRAIN_IMAGE, "1 NaN/inf voxel(s)"]),
    "2d_among_3d": (to_2d, [TRAIN_IMAGE, "2-D image", "3 other case(s) are 3-D"]),
}


@pytest.mark.parametrize("case", list(STANDALONE_CASES))
def test_standalone_fingerprint_refuses_unverified_data(roots: Path, case: str) -> None:
    breaks, needles = STANDALONE_CASES[case]
    breaks(raw(roots) / TRAIN_IMAGE)
    if case == "2d_among_3d":
        to_2d(raw(roots) / "labelsTr/synth_002.nii.gz")  # a consistent 2-D case
    result = cli(roots, "fingerprint", "-d", "900", "-np", "2")
    one_error_line(result, "fingerprint", "case synth_002", *needles)
    assert not (pre(roots) / "dataset_fingerprint.json").exists()
    assert not (pre(roots) / "verify.json").exists()


@pytest.mark.slow
def test_plan_and_preprocess_refuse_data_changed_since_verify(roots: Path) -> None:
    first = cli(roots, "fingerprint", "-d", "900", "-np", "2")
    assert first.returncode == 0, first.stderr
    assert "verify.json: not found; checking" in first.stdout  # it ran the check itself
    report = pre(roots) / "verify.json"
    written = report.stat().st_mtime_ns
    again = cli(roots, "plan", "-d", "900")
    assert again.returncode == 0, again.stderr
    assert "checking" not in again.stdout  # a current report: the data is not read twice
    assert report.stat().st_mtime_ns == written
    # the data changes after planning: preprocess re-checks and refuses it
    poison(np.inf)(raw(roots) / TRAIN_IMAGE)
    result = cli(roots, "preprocess", "-d", "900", "-c", "3d_fullres", "-np", "1")
    one_error_line(result, "preprocess", "case synth_002", TRAIN_IMAGE, "NaN/inf")
    assert not (pre(roots) / "nnUNetPlans_3d_fullres").exists()
    assert not (pre(roots) / "gt_segmentations").exists()
    assert not report.exists()
    result = cli(roots, "plan", "-d", "900", "-overwrite_plans_name", "Other")
    one_error_line(result, "plan", TRAIN_IMAGE, "NaN/inf")
    assert not (pre(roots) / "Other.json").exists()


# ---------------------------------------------------------------- predict and evaluate


@pytest.mark.slow
def test_predict_refuses_a_nan_input_before_predicting(roots: Path) -> None:
    dataset_json = json.loads((raw(roots) / "dataset.json").read_text())
    make_model(roots / "results", dataset_json, "3d_tiny", [0])
    poison(np.nan)(raw(roots) / TEST_IMAGE)
    output = roots / "pred"
    result = cli(
        roots,
        *("predict", "-i", str(raw(roots) / "imagesTs"), "-o", str(output), "-d", "900"),
        *("-c", "3d_tiny", "-f", "0", "-device", "cpu", "-npp", "0", "-nps", "0"),
    )
    one_error_line(result, "predict", "case synth_t001", TEST_IMAGE, "1 NaN/inf voxel(s)")
    assert not output.exists()


def _evaluate(roots: Path) -> tuple[Path, Path]:
    """References and (perfect) predictions: copies of labelsTs."""
    gt, pred = roots / "gt", roots / "pred"
    shutil.copytree(raw(roots) / "labelsTs", gt, dirs_exist_ok=True)
    shutil.copytree(raw(roots) / "labelsTs", pred, dirs_exist_ok=True)
    return gt, pred


@pytest.mark.parametrize("case", ["truncated_reference", "shape_mismatch", "spacing_mismatch"])
def test_evaluate_refuses_broken_references_and_predictions(roots: Path, case: str) -> None:
    gt, pred = _evaluate(roots)
    name = "synth_t001.nii.gz"
    if case == "truncated_reference":
        truncate(gt / name)
        needles = [str(gt / name), "unreadable or corrupt", "truncated"]
    elif case == "shape_mismatch":
        crop(pred / name)
        needles = [str(pred / name), "shape", "differs from the reference", str(gt / name)]
    else:

        def stretch(path: Path) -> None:
            image = sitk.ReadImage(str(path))
            image.SetSpacing([s * 1.05 for s in image.GetSpacing()])
            sitk.WriteImage(image, str(path), useCompression=True)

        stretch(pred / name)
        needles = ["spacing", f"of {pred / name} differs from", str(gt / name)]
    dataset_json = str(raw(roots) / "dataset.json")
    result = cli(roots, "evaluate", str(gt), str(pred), "-djfile", dataset_json, "-np", "1")
    one_error_line(result, "evaluate", *needles)
    assert not (pred / "summary.json").exists()


# ---------------------------------------------------------------- the workflow


@pytest.mark.slow
def test_workflow_stops_at_the_check_on_a_truncated_test_image(tmp_path: Path, make_raw_dataset):
    raw_root = tmp_path / "raw"
    make_raw_dataset(raw_root / DATASET, **TINY)
    truncate(raw_root / DATASET / TEST_IMAGE)
    config = tiny_config(tmp_path / "work", raw_root=str(raw_root))
    config["dataset"]["synthetic"]["enabled"] = False
    result = snakemake(tmp_path, config, "preprocessed", check=False)
    assert result.returncode == 2
    logs = tmp_path / "work" / "logs" / DATASET
    # on the console, checked before any job (nnunet_core.workflow.dataset_check)
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and TEST_IMAGE in errors[0] and "truncated" in errors[0], errors
    assert not list(logs.glob("fingerprint*.log"))  # nothing after the check started
    work_pre = tmp_path / "work" / "preprocessed" / DATASET
    assert not (work_pre / "verify.json").exists()
    assert not (work_pre / "dataset_fingerprint.json").exists()
