"""convert-old-dataset (upstream's nnUNetv2_convert_old_nnUNet_dataset, issue 49 item 4): a tiny
nnU-Net v1 task built here (3-D, two modalities, two training cases, one test case) converted
through the real CLI; file names, dataset.json and voxels checked, and all of it compared with
upstream's own converter where the peer venv is installed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main
from tests.helpers.nifti_tasks import SHAPE, files_below, geometry, image_3d, write_image
from tests.helpers.peer import HAS_PEER, peer_roots_env, upstream

CASES = ["hippocampus_001", "hippocampus_002", "hippocampus_003"]  # the last one is the test case
V1_KEYS = [
    "name", "description", "tensorImageSize", "reference", "licence", "release",
    "modality", "labels", "numTraining", "numTest", "training", "test",
]  # fmt: skip


def make_v1_task(root: Path) -> Path:
    """A v1 task: ``<case>_000c`` images of two modalities, labels, a test case, dataset.json."""
    task = root / "Task004_Hippocampus"
    rng = np.random.default_rng(4)
    for i, case in enumerate(CASES):
        folder = "imagesTr" if i < 2 else "imagesTs"
        for channel in range(2):
            array = rng.integers(-100, 400, SHAPE).astype(np.int16)
            write_image(image_3d(array), task / folder / f"{case}_{channel:04d}.nii.gz")
        if i < 2:
            labels = rng.integers(0, 3, SHAPE).astype(np.uint8)
            write_image(image_3d(labels), task / "labelsTr" / f"{case}.nii.gz")
    values = [
        "Hippocampus", "tiny test task", "3D", "test", "CC-BY-SA 4.0", "1.0 04/05/2018",
        {"0": "MRI", "1": "CT"}, {"0": "background", "1": "Anterior", "2": "Posterior"}, 2, 1,
        [{"image": f"./imagesTr/{c}.nii.gz", "label": f"./labelsTr/{c}.nii.gz"} for c in CASES[:2]],
        [f"./imagesTs/{CASES[2]}.nii.gz"],
    ]  # fmt: skip
    (task / "dataset.json").write_text(
        json.dumps(dict(zip(V1_KEYS, values, strict=True)), indent=4)
    )
    return task


def _convert(tmp_path: Path, task: Path, name: str = "Dataset004_Hippocampus") -> int:
    return main(["convert-old-dataset", str(task), name, "--raw", str(tmp_path / "raw")])


@pytest.fixture(autouse=True)
def _no_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results"):
        monkeypatch.delenv(name, raising=False)


def test_a_v1_task_is_copied_and_its_dataset_json_translated(tmp_path: Path) -> None:
    task = make_v1_task(tmp_path / "v1")
    assert _convert(tmp_path, task) == 0
    out = tmp_path / "raw" / "Dataset004_Hippocampus"
    assert files_below(out) == [
        "dataset.json",
        *(f"imagesTr/{case}_{c:04d}.nii.gz" for case in CASES[:2] for c in range(2)),
        f"imagesTs/{CASES[2]}_0000.nii.gz",
        f"imagesTs/{CASES[2]}_0001.nii.gz",
        *(f"labelsTr/{case}.nii.gz" for case in CASES[:2]),
    ]
    for relative in files_below(out)[1:]:
        assert (out / relative).read_bytes() == (task / relative).read_bytes(), relative
    source = sitk.GetArrayFromImage(sitk.ReadImage(str(task / "labelsTr" / f"{CASES[1]}.nii.gz")))
    ours = sitk.GetArrayFromImage(sitk.ReadImage(str(out / "labelsTr" / f"{CASES[1]}.nii.gz")))
    np.testing.assert_array_equal(ours, source)
    text = (out / "dataset.json").read_text()
    assert not text.endswith("\n")
    written = json.loads(text)
    assert list(written) == [
        "name", "description", "reference", "licence", "release",
        "labels", "numTraining", "channel_names", "file_ending",
    ]  # fmt: skip
    assert written["labels"] == {"background": 0, "Anterior": 1, "Posterior": 2}
    assert written["channel_names"] == {"0": "MRI", "1": "CT"}
    assert written["file_ending"] == ".nii.gz"
    assert written["numTraining"] == 2
    assert text == json.dumps(written, indent=4)
    assert not [p for p in out.rglob(".*")], "no temporaries left"


def test_a_taken_id_is_refused_and_an_unfinished_conversion_is_completed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = make_v1_task(tmp_path / "v1")
    (tmp_path / "raw" / "Dataset004_Other").mkdir(parents=True)
    assert _convert(tmp_path, task) == 2
    assert "already taken" in capsys.readouterr().err
    (tmp_path / "raw" / "Dataset004_Other").rmdir()
    assert _convert(tmp_path, task) == 0
    out = tmp_path / "raw" / "Dataset004_Hippocampus"
    finished = {name: (out / name).read_bytes() for name in files_below(out)}
    (out / "dataset.json").unlink()  # as a killed conversion leaves it, with a stale temporary
    (out / "labelsTr" / f"{CASES[0]}.nii.gz").unlink()
    (out / "labelsTr" / f".{CASES[0]}.nii.gz.abcd1234.nii.gz").write_bytes(b"torn")
    assert _convert(tmp_path, task) == 0
    assert {name: (out / name).read_bytes() for name in files_below(out)} == finished


@pytest.mark.parametrize(
    "fault", ["no_folder", "no_json", "no_labels_folder", "bad_name", "bad_label"]
)
def test_bad_input_is_one_line_naming_it_and_exit_2(
    fault: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = make_v1_task(tmp_path / "v1")
    name = "Dataset004_Hippocampus"
    if fault == "no_folder":
        task = tmp_path / "v1" / "Task005_Missing"
        named = str(task)
    elif fault == "no_json":
        named = str(task / "dataset.json")
        (task / "dataset.json").unlink()
    elif fault == "no_labels_folder":
        named = str(task / "labelsTr")
        (task / "labelsTr").rename(task / "labels")
    elif fault == "bad_name":
        name = named = "Task004_Hippocampus"
    else:
        named = str(task / "dataset.json")
        content = json.loads((task / "dataset.json").read_text())
        content["labels"]["one"] = "Anterior"
        (task / "dataset.json").write_text(json.dumps(content))
    assert _convert(tmp_path, task, name) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("nnunet-core convert-old-dataset: error: "), lines[0]
    assert named in lines[0], lines[0]
    assert not (tmp_path / "raw").exists(), "refused before anything is written"


@pytest.mark.skipif(not HAS_PEER, reason="no upstream peer venv (~/.cache/nnunet-peer)")
def test_parity_with_upstreams_converter(tmp_path: Path) -> None:
    task = make_v1_task(tmp_path / "v1")
    env, theirs_root = peer_roots_env(tmp_path)
    upstream(env, "nnUNetv2_convert_old_nnUNet_dataset", str(task), "Dataset004_Hippocampus")
    assert _convert(tmp_path, task) == 0
    theirs = theirs_root / "Dataset004_Hippocampus"
    ours = tmp_path / "raw" / "Dataset004_Hippocampus"
    assert files_below(ours) == files_below(theirs)
    assert (ours / "dataset.json").read_bytes() == (theirs / "dataset.json").read_bytes()
    for relative in files_below(theirs):
        if relative.endswith(".nii.gz"):
            np.testing.assert_array_equal(
                sitk.GetArrayFromImage(sitk.ReadImage(str(ours / relative))),
                sitk.GetArrayFromImage(sitk.ReadImage(str(theirs / relative))),
            )
            assert geometry(ours / relative) == geometry(theirs / relative), relative
