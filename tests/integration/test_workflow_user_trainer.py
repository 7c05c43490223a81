"""The issue's acceptance run for a user's trainer, through the real Snakemake.

A trainer defined in a file outside the repository (a copy of examples/focal_dice_loss), named by
its path in ``training.trainer``, trains 2 folds of the demo data (1 epoch of 2 iterations), is
cross-validated, selected and predicts the test set; its zip, exported after the file was
deleted, installs into an empty results folder and predicts there exactly what the original
folder predicts. ``snakemake reproduce`` packs the trainer's file, which a reader's unpack
writes and names in the rerun's config.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import yaml

from nnunet_core.workflow.reproduce import unpack
from tests.helpers.paths import REPO
from tests.helpers.training import check, cli
from tests.helpers.workflow import DATASET, copy_prepared, prepared_config, snakemake

pytestmark = pytest.mark.slow

TRAINER = "FocalDiceTrainer"
MODEL = f"{TRAINER}__nnUNetPlans__3d_fullres"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path) -> dict:
    root = tmp_path_factory.mktemp("user_trainer")
    mine = root / "my_methods"
    mine.mkdir()
    trainer_file = mine / "focal_dice_trainer.py"
    shutil.copy(REPO / "examples" / "focal_dice_loss" / "focal_dice_trainer.py", trainer_file)
    config = prepared_config(copy_prepared(prepared_work, root / "work"))
    config["training"].update(
        trainer=f"{trainer_file}:{TRAINER}",
        folds=[0, 1],
        epochs=1,
        iterations_per_epoch=2,
        val_iterations_per_epoch=1,
        retries=0,
    )
    result = snakemake(root, config)
    work = root / "work"
    return {
        "root": root,
        "work": work,
        "file": trainer_file,
        "config": config,
        "output": result.stdout + result.stderr,
    }


def roots(root: Path, results: Path) -> dict[str, str]:
    for name in ("raw", "preprocessed"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "nnUNet_raw": str(root / "raw"),
        "nnUNet_preprocessed": str(root / "preprocessed"),
        "nnUNet_results": str(results),
    }


def predict(env: dict[str, str], images: Path, output: Path) -> dict[str, np.ndarray]:
    args = [
        "predict",
        "-i",
        str(images),
        "-o",
        str(output),
        "-d",
        DATASET,
        "-c",
        "3d_fullres",
        "-f",
        "0",
        "1",
    ]
    flags = ("-tr", TRAINER, "-device", "cpu", "-npp", "1", "-nps", "1", "--trust-model-code")
    check(cli(env, *args, *flags))  # the model folder carries the trainer's code
    return {p.name: sitk.GetArrayFromImage(sitk.ReadImage(str(p))) for p in output.glob("*.nii.gz")}


def test_two_folds_train_are_selected_and_predict_the_test_set(run: dict) -> None:
    results = run["work"] / "results" / DATASET
    model = results / MODEL
    for fold in (0, 1):
        assert (model / f"fold_{fold}" / "validation" / "summary.json").is_file(), run["output"]
    assert json.loads((model / "trainer.json").read_text())["original_file"] == str(run["file"])
    information = (results / "inference_information.json").read_text()
    assert MODEL in information  # the selection chose among this trainer's models
    commands = [line for line in run["output"].splitlines() if "nnunet-core train " in line]
    assert commands and all(f"-tr {run['file']}:{TRAINER}" in c for c in commands), commands
    predicted = list((run["work"] / "predictions").rglob("*.nii.gz"))
    assert predicted, run["output"]
    report = next((run["work"] / "results").rglob("report.md")).read_text()
    assert "by the trainer FocalDiceTrainer, which overrides build_loss." in report


def test_the_reproduce_archive_carries_the_trainer_file(run: dict, tmp_path: Path) -> None:
    snakemake(run["root"], run["config"], "reproduce")
    rerun = tmp_path / "rerun"
    config = yaml.safe_load(
        unpack(run["work"] / "reproduce.tar.gz", rerun, trusted=True).read_text()
    )
    copy = (rerun / "trainers" / run["file"].name).resolve()
    assert config["training"]["trainer"] == f"{copy}:{TRAINER}"
    assert copy.read_bytes() == run["file"].read_bytes()


def test_its_zip_predicts_the_same_after_the_trainer_file_is_gone(
    run: dict, tmp_path: Path
) -> None:
    results = run["work"] / "results"
    images = next((run["work"] / "raw").rglob("imagesTs"))
    before = predict(roots(tmp_path, results), images, tmp_path / "before")
    run["file"].unlink()  # the receiving machine never had it
    archive = tmp_path / "model.zip"
    env = roots(tmp_path, results)
    export = ["export-model-to-zip", "-d", DATASET, "-o", str(archive), "-c", "3d_fullres"]
    check(cli(env, *export, "-tr", TRAINER, "-f", "0", "1"))
    installed = tmp_path / "empty_results"
    env = roots(tmp_path, installed)
    check(cli(env, "install-pretrained-model-from-zip", str(archive)))
    assert (installed / DATASET / MODEL / "trainer_source" / run["file"].name).is_file()
    after = predict(env, images, tmp_path / "after")
    assert before and sorted(after) == sorted(before)
    for name, segmentation in before.items():
        np.testing.assert_array_equal(after[name], segmentation)
