"""``nnunet-core predict`` on a tiny model folder made without training.

The model folder is what training leaves behind: plans.json, dataset.json and
``fold_k/checkpoint_final.pth`` written by the trainer's checkpoint module, here with random
weights of a tiny configuration (an override of the synth3d_peer900 plans). Random weights cost
the same and exercise every step; the checks are about files, geometry and errors, not quality.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import torch

from nnunet_core.inference.model_folder import load_trained_model
from nnunet_core.inference.predictor import PredictionSettings, input_cases, predict_cases
from tests.helpers.model_folder import make_model

DATASET = "Dataset900_Synth"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    root = tmp_path_factory.mktemp("predict")
    raw = make_raw_dataset(root / "raw" / DATASET, num_training=1, num_test=2)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    model_dir = make_model(root / "results", dataset_json, "3d_tiny", [0, 1])
    env = {**os.environ, "nnUNet_results": str(root / "results"), "OMP_NUM_THREADS": "1"}
    return {"root": root, "images": raw / "imagesTs", "model_dir": model_dir, "env": env}


@pytest.fixture(autouse=True)
def one_thread():
    """In-process predictions use one thread, as the CLI runs here (2 shared cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def predict_cli(setup: dict, output: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["predict", "-i", str(setup["images"]), "-o", str(output), "-d", "900"]
    return subprocess.run(
        [sys.executable, "-m", "nnunet_core", *args, "-c", "3d_tiny", "-device", "cpu", *extra],
        env=setup["env"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def geometry(path: Path) -> tuple:
    image = sitk.ReadImage(str(path))
    return image.GetSize(), image.GetSpacing(), image.GetOrigin(), image.GetDirection()


@pytest.fixture(scope="module")
def predicted(setup: dict) -> Path:
    output = setup["root"] / "pred"
    flags = ["-f", "0", "1", "--save_probabilities", "-npp", "1", "-nps", "1"]
    result = predict_cli(setup, output, *flags)
    assert result.returncode == 0, result.stderr
    return output


def test_outputs_have_the_input_geometry_and_probabilities_sum_to_one(
    setup: dict, predicted: Path
) -> None:
    for case in ("synth_t000", "synth_t001"):
        image = setup["images"] / f"{case}_0000.nii.gz"
        seg_path = predicted / f"{case}.nii.gz"
        assert geometry(seg_path) == geometry(image)
        seg = sitk.GetArrayFromImage(sitk.ReadImage(str(seg_path)))
        probabilities = np.load(predicted / f"{case}.npz")["probabilities"]
        assert probabilities.shape == (3, *seg.shape)
        np.testing.assert_allclose(probabilities.sum(axis=0), 1.0, atol=1e-5)
        np.testing.assert_array_equal(probabilities.argmax(axis=0), seg)
        assert (predicted / f"{case}.json").is_file()
    for name in ("dataset.json", "plans.json", "predict_from_raw_data_args.json"):
        assert (predicted / name).is_file()


def test_worker_pools_give_what_inline_prediction_gives(setup: dict, predicted: Path) -> None:
    model = load_trained_model(setup["model_dir"], [0, 1])
    assert model.folds == (0, 1) and model.mirror_axes == (0, 1, 2)
    cases = input_cases(setup["images"], model.dataset_json)
    inline = PredictionSettings(
        save_probabilities=True,
        num_processes_preprocessing=0,
        num_processes_export=0,
        progress=False,
    )
    output = setup["root"] / "inline"
    written = predict_cases(model, cases, output, inline)
    assert [p.name for p in written] == ["synth_t000.nii.gz", "synth_t001.nii.gz"]
    for case in ("synth_t000", "synth_t001"):
        ours = np.load(output / f"{case}.npz")["probabilities"]
        np.testing.assert_allclose(ours, np.load(predicted / f"{case}.npz")["probabilities"])
    # --continue_prediction: nothing is redone once every output exists
    before = {p.name: p.stat().st_mtime_ns for p in output.iterdir() if p.suffix in {".gz", ".npz"}}
    again = PredictionSettings(
        save_probabilities=True, overwrite=False, num_processes_export=0, progress=False
    )
    assert predict_cases(model, cases, output, again) == []
    after = {p.name: p.stat().st_mtime_ns for p in output.iterdir() if p.suffix in {".gz", ".npz"}}
    assert after == before


def test_a_missing_fold_names_the_file_and_the_train_command(setup: dict) -> None:
    output = setup["root"] / "missing_fold"
    result = predict_cli(setup, output, "-f", "0", "3")
    assert result.returncode == 2
    assert "fold_3/checkpoint_final.pth: not found" in result.stderr
    assert f"nnunet-core train {DATASET} 3d_tiny 3" in result.stderr
    assert not output.exists()


def test_wrong_channel_count_names_the_case(setup: dict) -> None:
    images = setup["root"] / "two_channels"
    shutil.copytree(setup["images"], images)
    shutil.copy(images / "synth_t001_0000.nii.gz", images / "synth_t001_0001.nii.gz")
    result = predict_cli({**setup, "images": images}, setup["root"] / "bad", "-f", "0")
    assert result.returncode == 2
    assert "case synth_t001" in result.stderr
    assert "expects 1 channel(s)" in result.stderr
    assert not (setup["root"] / "bad").exists()
    assert len(result.stderr.strip().splitlines()) == 1


def test_2d_model_predicts_volumes_slice_by_slice(setup: dict) -> None:
    dataset_json = json.loads((setup["model_dir"] / "dataset.json").read_text())
    model_dir = make_model(setup["root"] / "results_2d", dataset_json, "2d_tiny", [0])
    model = load_trained_model(model_dir)  # folds found on disk
    assert model.folds == (0,) and model.mirror_axes == (0, 1)
    cases = input_cases(setup["images"], model.dataset_json)[:1]
    settings = PredictionSettings(
        num_processes_preprocessing=0, num_processes_export=0, progress=False
    )
    output = setup["root"] / "pred_2d"
    [seg_path] = predict_cases(model, cases, output, settings)
    assert geometry(seg_path) == geometry(cases[0].images[0])
    assert set(np.unique(sitk.GetArrayFromImage(sitk.ReadImage(str(seg_path))))) <= {0, 1, 2}
