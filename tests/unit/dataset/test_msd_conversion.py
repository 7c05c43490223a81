"""convert-msd (upstream's nnUNetv2_convert_MSD_dataset, issue 49 item 4): tiny MSD tasks built
here, a 3-D single-modality one and a 4-D two-modality one, converted through the real CLI; file
names, dataset.json, voxels and geometry checked, and all of it compared with upstream's own
converter where the peer venv is installed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main
from tests.helpers.nifti_tasks import (
    ORIGIN,
    ROTATION,
    SPACING,
    files_below,
    geometry,
    make_task,
)
from tests.helpers.peer import HAS_PEER, peer_roots_env, upstream


def _convert(tmp_path: Path, task: Path, *extra: str) -> int:
    return main(
        [
            "convert-msd",
            "-i",
            str(task),
            "-np",
            "1",
            "--no-pbar",
            "--raw",
            str(tmp_path / "raw"),
            *extra,
        ]
    )


@pytest.fixture(autouse=True)
def _no_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results"):
        monkeypatch.delenv(name, raising=False)


def test_a_3d_task_is_copied_with_channel_suffixes_and_translated_json(tmp_path: Path) -> None:
    task = make_task(tmp_path / "msd", "Task05_Prostate", channels=1)
    assert _convert(tmp_path, task) == 0
    out = tmp_path / "raw" / "Dataset005_Prostate"
    assert files_below(out) == [
        "dataset.json",
        "imagesTr/prostate_000_0000.nii.gz",
        "imagesTr/prostate_001_0000.nii.gz",
        "imagesTs/prostate_002_0000.nii.gz",
        "labelsTr/prostate_000.nii.gz",
        "labelsTr/prostate_001.nii.gz",
    ]
    for ours, theirs in (
        ("imagesTr/prostate_001_0000.nii.gz", "imagesTr/prostate_001.nii.gz"),
        ("imagesTs/prostate_002_0000.nii.gz", "imagesTs/prostate_002.nii.gz"),
        ("labelsTr/prostate_000.nii.gz", "labelsTr/prostate_000.nii.gz"),
    ):
        assert (out / ours).read_bytes() == (task / theirs).read_bytes()
    text = (out / "dataset.json").read_text()
    assert not text.endswith("\n")
    written = json.loads(text)
    assert list(written) == [
        "name", "description", "reference", "licence", "release", "tensorImageSize",
        "labels", "numTraining", "numTest", "file_ending", "channel_names",
    ]  # fmt: skip
    assert written["labels"] == {"background": 0, "edema": 1, "tumour": 2}
    assert written["channel_names"] == {"0": "CT"}
    assert written["file_ending"] == ".nii.gz"
    assert written["numTraining"] == 2
    assert text == json.dumps(written, indent=4)


def test_a_4d_task_is_split_into_channel_files_with_3d_geometry(tmp_path: Path) -> None:
    task = make_task(tmp_path / "msd", "Task01_BrainTumour", channels=2, n_train=3)
    assert _convert(tmp_path, task, "-overwrite_id", "501") == 0
    out = tmp_path / "raw" / "Dataset501_BrainTumour"
    images = [f for f in files_below(out) if f.startswith("images")]
    assert images == [
        *(f"imagesTr/braintumour_{i:03d}_{c:04d}.nii.gz" for i in range(3) for c in range(2)),
        "imagesTs/braintumour_003_0000.nii.gz",
        "imagesTs/braintumour_003_0001.nii.gz",
    ]
    source = sitk.GetArrayFromImage(
        sitk.ReadImage(str(task / "imagesTs" / "braintumour_003.nii.gz"))
    )
    for channel in range(2):
        path = out / "imagesTs" / f"braintumour_003_{channel:04d}.nii.gz"
        image = sitk.ReadImage(str(path))
        assert image.GetDimension() == 3
        np.testing.assert_array_equal(sitk.GetArrayFromImage(image), source[channel])
        assert image.GetSpacing() == pytest.approx(SPACING)
        assert image.GetOrigin() == pytest.approx(ORIGIN)
        assert image.GetDirection() == pytest.approx(ROTATION)
    assert json.loads((out / "dataset.json").read_text())["channel_names"] == {
        "0": "FLAIR",
        "1": "T1w",
    }
    assert not [p for p in out.rglob(".*")], "no temporaries or hidden files left"


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("fault", ["no_json", "missing_image", "not_a_task", "bad_image"])
def test_bad_input_is_one_line_naming_the_file_and_exit_2(
    fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = make_task(tmp_path / "msd", "Task05_Prostate", channels=1)
    named = {
        "no_json": task / "dataset.json",
        "missing_image": task / "imagesTr" / "prostate_001.nii.gz",
        "not_a_task": tmp_path / "msd" / "Prostate",
        "bad_image": task / "imagesTs" / "prostate_002.nii.gz",
    }[fault]
    if fault == "not_a_task":
        task = task.rename(named)
    elif fault == "bad_image":
        named.write_bytes(b"not an image at all")
    else:
        named.unlink()
    assert _convert(tmp_path, task) == 2
    line = _error_line(capsys)
    assert line.startswith(f"nnunet-core convert-msd: error: {named}"), line
    if fault != "bad_image":  # refused before anything is written
        assert not (tmp_path / "raw").exists()


def test_a_taken_id_is_refused_and_an_unfinished_conversion_is_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = make_task(tmp_path / "msd", "Task05_Prostate", channels=1)
    taken = tmp_path / "results" / "Dataset005_Other"
    taken.mkdir(parents=True)
    assert _convert(tmp_path, task, "--results", str(tmp_path / "results")) == 2
    assert "already taken" in _error_line(capsys)
    assert _convert(tmp_path, task) == 0
    out = tmp_path / "raw" / "Dataset005_Prostate"
    finished = {name: (out / name).read_bytes() for name in files_below(out)}
    assert _convert(tmp_path, task) == 2  # a finished dataset is upstream's taken id
    assert "already taken" in _error_line(capsys)
    (out / "dataset.json").unlink()  # as a killed conversion leaves it, with a stale temporary
    (out / "imagesTr" / "prostate_000_0000.nii.gz").unlink()
    (out / "imagesTr" / ".prostate_000_0000.nii.gz.abcd1234.nii.gz").write_bytes(b"torn")
    assert _convert(tmp_path, task) == 0
    assert {name: (out / name).read_bytes() for name in files_below(out)} == finished


@pytest.mark.skipif(not HAS_PEER, reason="no upstream peer venv (~/.cache/nnunet-peer)")
@pytest.mark.parametrize(("name", "channels"), [("Task05_Prostate", 1), ("Task01_BrainTumour", 2)])
def test_parity_with_upstreams_converter(name: str, channels: int, tmp_path: Path) -> None:
    task = make_task(tmp_path / "msd", name, channels=channels)
    env, theirs_root = peer_roots_env(tmp_path)
    upstream(env, "nnUNetv2_convert_MSD_dataset", "-i", str(task), "-np", "1")
    assert _convert(tmp_path, task) == 0
    [theirs] = list(theirs_root.iterdir())
    ours = tmp_path / "raw" / theirs.name
    assert files_below(ours) == files_below(theirs)
    assert (ours / "dataset.json").read_text() == (theirs / "dataset.json").read_text()
    for relative in files_below(theirs):
        if not relative.endswith(".nii.gz"):
            continue
        mine, upstreams = (
            sitk.ReadImage(str(ours / relative)),
            sitk.ReadImage(str(theirs / relative)),
        )
        np.testing.assert_array_equal(
            sitk.GetArrayFromImage(mine), sitk.GetArrayFromImage(upstreams)
        )
        assert geometry(ours / relative) == geometry(theirs / relative), relative
