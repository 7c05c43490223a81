"""Prediction outputs never land in a raw dataset nor replace files that are not predictions
(issue 51), through the real CLI (``python -m nnunet_core``) on a tiny model made without
training.

The issue's probe: ``predict -i rawcopy/imagesTr -o rawcopy/labelsTr`` silently overwrote the
ground-truth labels. ``predict``, ``ensemble`` and ``apply-postprocessing`` now refuse a raw
dataset's folder in one line (exit 2), with every file of the dataset unchanged (checksums) and
nothing written; an existing folder that no prediction command wrote keeps its files unless
``--overwrite``; a folder they wrote may be written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core.io.prediction_output import PREDICTION_MARKER
from tests.helpers.model_folder import make_model

DATASET = "Dataset900_Synth"
STEPS = {
    "postprocessing_fns": ["remove_all_but_largest_component_from_segmentation"],
    "postprocessing_kwargs": [{"labels_or_regions": 1}],
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    """A raw dataset (the user's ground truth), a tiny model, two prediction folders with
    probabilities (the ensemble's and postprocessing's inputs) and a postprocessing.json."""
    root = tmp_path_factory.mktemp("output_safety")
    raw = make_raw_dataset(root / "raw" / DATASET, num_training=2, num_test=2)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    make_model(root / "results", dataset_json, "3d_tiny", [0, 1])
    env = {**os.environ, "nnUNet_results": str(root / "results"), "OMP_NUM_THREADS": "1"}
    setup = {"root": root, "raw": raw, "env": env}
    for fold in ("0", "1"):
        done = cli(setup, *predict(raw / "imagesTs", root / f"pred_{fold}"), "-f", fold)
        assert done.returncode == 0, done.stderr
    (root / "postprocessing.json").write_text(json.dumps(STEPS))
    return setup


def cli(setup: dict, *args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nnunet_core", *map(str, args)],
        env=setup["env"],
        capture_output=True,
        text=True,
        timeout=180,
    )


def predict(images: Path, output: Path) -> list[str | Path]:
    flags = ["-device", "cpu", "-npp", "0", "-nps", "0", "--save_probabilities"]
    return ["predict", "-i", images, "-o", output, "-d", "900", "-c", "3d_tiny", *flags]


def ensemble(setup: dict, output: Path) -> list[str | Path]:
    root = setup["root"]
    return ["ensemble", "-i", root / "pred_0", root / "pred_1", "-o", output, "-np", "1"]


def postprocess(setup: dict, output: Path) -> list[str | Path]:
    root = setup["root"]
    pp = root / "postprocessing.json"
    return ["apply-postprocessing", "-i", root / "pred_0", "-o", output, "--pp-file", pp]


COMMANDS = {
    "predict": lambda setup, output: [*predict(setup["raw"] / "imagesTr", output), "-f", "0"],
    "ensemble": ensemble,
    "apply-postprocessing": postprocess,
}


def checksums(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def one_line(done: subprocess.CompletedProcess, command: str, *needles: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nnunet-core {command}: error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _raw_targets(raw: Path, scratch: Path) -> dict[str, Path]:
    link = scratch / "labels_link"
    if not link.is_symlink():
        scratch.mkdir(parents=True, exist_ok=True)
        link.symlink_to(raw / "labelsTr")
    return {
        "labelsTr": raw / "labelsTr",
        "imagesTr": raw / "imagesTr",
        "labelsTs": raw / "labelsTs",
        "imagesTs-new-sub": raw / "imagesTs" / "predictions",
        "the-dataset-folder": raw,
        "labelsTr-through-a-symlink": link,
    }


TARGETS = [
    "labelsTr",
    "imagesTr",
    "labelsTs",
    "imagesTs-new-sub",
    "the-dataset-folder",
    "labelsTr-through-a-symlink",
]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("target", TARGETS)
def test_a_raw_dataset_folder_is_refused(setup: dict, command: str, target: str) -> None:
    raw = setup["raw"]
    output = _raw_targets(raw, setup["root"] / "links")[target]
    (raw / "labelsTs").mkdir(exist_ok=True)
    before = checksums(raw)
    done = cli(setup, *COMMANDS[command](setup, output))
    one_line(done, command, f"-o {output}", f"in the raw dataset {raw}")
    assert checksums(raw) == before
    assert not (raw / "imagesTs" / "predictions").exists()
    assert not (raw / "labelsTr" / PREDICTION_MARKER).exists()


def _user_folder(setup: dict, name: str, files: list[str]) -> Path:
    """A folder of the user's (no prediction command wrote it) holding ``files``."""
    folder = setup["root"] / name
    folder.mkdir()
    for file in files:
        (folder / file).write_bytes(b"the user's own " + file.encode())
    return folder


@pytest.mark.parametrize("command", list(COMMANDS))
def test_files_that_are_not_predictions_are_kept_unless_overwrite(
    setup: dict, command: str
) -> None:
    """``{case}.nii.gz`` in a folder no prediction command wrote: refused, then --overwrite."""
    if command == "predict":  # a case the command writes: predict reads imagesTr here
        case = min(setup["raw"].glob("imagesTr/*_0000.nii.gz")).name.removesuffix("_0000.nii.gz")
    else:
        case = min((setup["root"] / "pred_0").glob("*.npz")).stem
    folder = _user_folder(setup, f"labels_{command}", [f"{case}.nii.gz", "notes.txt"])
    before = checksums(folder)
    done = cli(setup, *COMMANDS[command](setup, folder))
    line = one_line(done, command, f"-o {folder}", f"holds {case}.nii.gz", "--overwrite")
    assert "no prediction folder" in line
    assert checksums(folder) == before
    done = cli(setup, *COMMANDS[command](setup, folder), "--overwrite")
    assert done.returncode == 0, done.stderr
    assert (
        folder / f"{case}.nii.gz"
    ).read_bytes() != b"the user's own " + f"{case}.nii.gz".encode()
    assert (folder / "notes.txt").read_bytes() == b"the user's own notes.txt"
    assert (folder / PREDICTION_MARKER).is_file()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_folder_of_predictions_is_written_again(setup: dict, command: str) -> None:
    """The folder the command wrote (its marker) is replaced without --overwrite; other files
    of a user's folder that the command does not write do not stop it."""
    folder = _user_folder(setup, f"again_{command}", ["notes.txt"])
    for _ in range(2):
        done = cli(setup, *COMMANDS[command](setup, folder))
        assert done.returncode == 0, done.stderr
    assert (folder / PREDICTION_MARKER).is_file()
    assert (folder / "notes.txt").read_bytes() == b"the user's own notes.txt"
    assert list(folder.glob("*.nii.gz"))
