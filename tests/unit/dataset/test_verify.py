"""``nnunet-core verify``: each broken-dataset problem gives one line naming the case and the
problem, exit code 2 and no report; a clean dataset gets its report. Datasets come from the real
generator (3 cases of 8x16x16) and are then broken on disk."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main

DATASET = "Dataset901_Tiny"
TINY = {"num_training": 3, "num_test": 0, "shape": (8, 16, 16)}
ERROR = "nnunet-core verify: error: "


@pytest.fixture
def dataset(tmp_path: Path, make_raw_dataset) -> Path:
    return make_raw_dataset(tmp_path / "raw" / DATASET, **TINY)


def _flags(dataset_dir: Path) -> list[str]:
    roots = dataset_dir.parent.parent
    return [
        "-d",
        "901",
        "--raw",
        str(roots / "raw"),
        "--preprocessed",
        str(roots / "pre"),
        "-np",
        "1",
    ]


def _report_path(dataset_dir: Path) -> Path:
    return dataset_dir.parent.parent / "pre" / DATASET / "verify.json"


def run_main(dataset_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["verify", *_flags(dataset_dir)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_subprocess(dataset_dir: Path) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "nnunet_core", "verify", *_flags(dataset_dir)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def assert_one_line_error(result: tuple[int, str, str], dataset_dir: Path, *needles: str) -> str:
    code, _, err = result
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not _report_path(dataset_dir).exists()
    return lines[0]


def edit_json(dataset_dir: Path, **changes) -> None:
    path = dataset_dir / "dataset.json"
    content = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            content.pop(key)
        else:
            content[key] = value
    path.write_text(json.dumps(content))


def rewrite(path: Path, change) -> None:
    """Read ``path``, let ``change(array, image)`` return a new image, write it back."""
    image = sitk.ReadImage(str(path))
    sitk.WriteImage(change(sitk.GetArrayFromImage(image), image), str(path), useCompression=True)


def with_geometry(array: np.ndarray, like: sitk.Image) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.CopyInformation(like)
    return image


# ---------------------------------------------------------------- the good dataset


def test_good_dataset_passes_and_writes_report(dataset: Path) -> None:
    code, out, err = run_subprocess(dataset)
    assert code == 0, err
    assert "3 case(s) OK" in out
    report = json.loads(_report_path(dataset).read_text())
    assert report["cases_checked"] == 3
    assert report["channels"] == {"0": "MR"}
    assert {0, 1} <= set(report["labels_found"]) <= {0, 1, 2}
    assert report["dimensionality"] == 3
    assert len(report["spacing"]["median"]) == 3
    assert report["warnings"] == []


def test_output_flag_and_multichannel(tmp_path: Path, make_raw_dataset) -> None:
    dataset_dir = make_raw_dataset(tmp_path / "raw" / DATASET, **TINY, channels=2)
    target = tmp_path / "elsewhere" / "report.json"
    assert main(["verify", *_flags(dataset_dir), "--output", str(target), "-np", "2"]) == 0
    assert json.loads(target.read_text())["channels"] == {"0": "MR", "1": "T2"}
    assert not _report_path(dataset_dir).exists()


def test_case_without_foreground_is_a_warning(dataset: Path, capsys) -> None:
    rewrite(dataset / "labelsTr" / "synth_001.nii.gz", lambda a, im: with_geometry(a * 0, im))
    code, _, err = run_main(dataset, capsys)
    assert code == 0, err
    assert "nnunet-core verify: warning: case synth_001: no foreground" in err
    report = json.loads(_report_path(dataset).read_text())
    assert report["cases_without_foreground"] == ["synth_001"]
    assert any("synth_001" in w for w in report["warnings"])


def test_ignore_label_is_allowed(dataset: Path, capsys) -> None:
    labels = {"background": 0, "organ": 1, "lesion": 2, "ignore": 3}
    edit_json(dataset, labels=labels)
    rewrite(
        dataset / "labelsTr" / "synth_000.nii.gz",
        lambda a, im: with_geometry(np.where(a == 0, 3, a).astype(a.dtype), im),
    )
    code, _, err = run_main(dataset, capsys)
    assert code == 0, err
    report = json.loads(_report_path(dataset).read_text())
    assert report["ignore_label"] == 3 and 3 in report["labels_found"]


def test_region_labels_allow_their_union(dataset: Path, capsys) -> None:
    edit_json(
        dataset, labels={"background": 0, "whole": [1, 2], "lesion": 2}, regions_class_order=[1, 2]
    )
    code, _, err = run_main(dataset, capsys)
    assert code == 0, err
    assert json.loads(_report_path(dataset).read_text())["has_regions"] is True


def test_tiny_geometry_rounding_is_tolerated(dataset: Path, capsys) -> None:
    def nudge(array: np.ndarray, image: sitk.Image) -> sitk.Image:
        out = with_geometry(array, image)
        out.SetSpacing([s * (1 + 1e-6) for s in image.GetSpacing()])
        out.SetOrigin([o + 1e-5 for o in image.GetOrigin()])
        return out

    rewrite(dataset / "labelsTr" / "synth_000.nii.gz", nudge)
    assert run_main(dataset, capsys)[0] == 0


# ---------------------------------------------------------------- one test per problem


def test_missing_dataset_json_key(dataset: Path, capsys) -> None:
    edit_json(dataset, labels=None)
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "dataset.json", "missing required key", "labels"
    )


def test_num_training_mismatch(dataset: Path) -> None:
    edit_json(dataset, numTraining=5)
    assert_one_line_error(
        run_subprocess(dataset), dataset, "dataset.json", "numTraining is 5", "3 training case"
    )


def test_missing_channel_file(tmp_path: Path, make_raw_dataset, capsys) -> None:
    dataset_dir = make_raw_dataset(tmp_path / "raw" / DATASET, **TINY, channels=2)
    (dataset_dir / "imagesTr" / "synth_001_0001.nii.gz").unlink()
    assert_one_line_error(
        run_main(dataset_dir, capsys),
        dataset_dir,
        "case synth_001",
        "missing channel 1 file",
        "imagesTr/synth_001_0001.nii.gz",
    )


def test_missing_label_file(dataset: Path) -> None:
    (dataset / "labelsTr" / "synth_002.nii.gz").unlink()
    assert_one_line_error(
        run_subprocess(dataset),
        dataset,
        "case synth_002",
        "missing label file",
        "labelsTr/synth_002.nii.gz",
    )


def _break_shape(array: np.ndarray, image: sitk.Image) -> sitk.Image:
    out = sitk.GetImageFromArray(np.ascontiguousarray(array[:, :, :-1]))
    out.SetSpacing(image.GetSpacing())
    out.SetOrigin(image.GetOrigin())
    out.SetDirection(image.GetDirection())
    return out


def _break(attribute: str):
    def change(array: np.ndarray, image: sitk.Image) -> sitk.Image:
        out = with_geometry(array, image)
        if attribute == "spacing":
            out.SetSpacing([s * 1.01 for s in image.GetSpacing()])
        elif attribute == "origin":
            out.SetOrigin([o + 1.0 for o in image.GetOrigin()])
        else:
            out.SetDirection((1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
        return out

    return change


@pytest.mark.parametrize("attribute", ["shape", "spacing", "origin", "direction"])
def test_image_label_geometry_mismatch(dataset: Path, capsys, attribute: str) -> None:
    change = _break_shape if attribute == "shape" else _break(attribute)
    rewrite(dataset / "labelsTr" / "synth_001.nii.gz", change)
    line = assert_one_line_error(
        run_main(dataset, capsys),
        dataset,
        "case synth_001",
        f"{attribute} ",
        "labelsTr/synth_001.nii.gz",
    )
    assert "differs from" in line and "imagesTr/synth_001_0000.nii.gz" in line


def test_undeclared_label_values(dataset: Path, capsys) -> None:
    def add_values(array: np.ndarray, image: sitk.Image) -> sitk.Image:
        array = array.copy()
        array[0, 0, 0], array[0, 0, 1] = 3, 7
        return with_geometry(array, image)

    rewrite(dataset / "labelsTr" / "synth_000.nii.gz", add_values)
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "case synth_000", "[3, 7]", "not declared"
    )


def test_non_consecutive_declared_labels(dataset: Path, capsys) -> None:
    edit_json(dataset, labels={"background": 0, "organ": 1, "lesion": 3})
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "dataset.json", "consecutive", "missing [2]"
    )


@pytest.mark.parametrize("ending", [".nii.gz", ".nii", ".mha"])
def test_nan_and_inf_voxels(tmp_path: Path, make_raw_dataset, capsys, ending: str) -> None:
    # SimpleITK reads NIfTI NaN/inf as 0, so this proves verify looks at the stored bytes.
    dataset_dir = make_raw_dataset(tmp_path / "raw" / DATASET, **TINY, file_ending=ending)

    def poison(array: np.ndarray, image: sitk.Image) -> sitk.Image:
        array = array.copy()
        array[1, 2, 3], array[2, 3, 4] = np.nan, np.inf
        return with_geometry(array, image)

    name = f"imagesTr/synth_002_0000{ending}"
    rewrite(dataset_dir / name, poison)
    assert_one_line_error(
        run_main(dataset_dir, capsys), dataset_dir, "case synth_002", name, "2 NaN/inf"
    )


def test_wrong_file_ending(dataset: Path, capsys) -> None:
    image = sitk.ReadImage(str(dataset / "imagesTr" / "synth_000_0000.nii.gz"))
    sitk.WriteImage(image, str(dataset / "imagesTr" / "synth_009_0000.mha"))
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "imagesTr/synth_009_0000.mha", "file_ending '.nii.gz'"
    )


def test_mixed_2d_and_3d_cases(dataset: Path, capsys) -> None:
    for name in ("imagesTr/synth_002_0000.nii.gz", "labelsTr/synth_002.nii.gz"):
        rewrite(dataset / name, lambda a, _im: sitk.GetImageFromArray(np.ascontiguousarray(a[3])))
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "case synth_002", "2-D image", "3-D", "mixed"
    )


def test_empty_dataset(dataset: Path, capsys) -> None:
    for folder in ("imagesTr", "labelsTr"):
        shutil.rmtree(dataset / folder)
        (dataset / folder).mkdir()
    assert_one_line_error(
        run_main(dataset, capsys), dataset, "imagesTr", "no training cases", "empty dataset"
    )


@pytest.mark.parametrize("content", [b"not an image at all", b""])
def test_unreadable_file(dataset: Path, capsys, content: bytes) -> None:
    (dataset / "imagesTr" / "synth_001_0000.nii.gz").write_bytes(content)
    assert_one_line_error(
        run_main(dataset, capsys),
        dataset,
        "case synth_001",
        "imagesTr/synth_001_0000.nii.gz",
        "unreadable or corrupt",
    )


def test_truncated_file_via_subprocess(dataset: Path) -> None:
    path = dataset / "labelsTr" / "synth_000.nii.gz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # ITK alone would zero-fill the missing voxels
    assert_one_line_error(
        run_subprocess(dataset),
        dataset,
        "case synth_000",
        "labelsTr/synth_000.nii.gz",
        "unreadable or corrupt",
    )


# ---------------------------------------------------------------- several problems at once


def test_all_broken_cases_reported_first_line_names_case(dataset: Path, capsys) -> None:
    (dataset / "labelsTr" / "synth_000.nii.gz").unlink()
    (dataset / "imagesTr" / "synth_002_0000.nii.gz").write_bytes(b"junk")
    code, _, err = main(["verify", *_flags(dataset), "-np", "2"]), None, capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2
    assert lines[0] == f"{ERROR}case synth_000: missing label file labelsTr/synth_000.nii.gz"
    assert lines[1].startswith(f"{ERROR}case synth_002: imagesTr/synth_002_0000.nii.gz")
    assert len(lines) == 3 and "2 problem(s)" in lines[2] and "2 of 3 case(s)" in lines[2]
    assert not _report_path(dataset).exists()
