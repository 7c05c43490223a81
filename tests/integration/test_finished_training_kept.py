"""A failure after a fold's last epoch costs no epoch: the retry goes straight to validation.

A real Snakemake run of the tiny workflow trains fold 0; its trainer is killed (SIGTERM) after
"training finished", during the final validation. Snakemake removes the failed job's declared
output (the validation summary only), so checkpoint_final.pth stays: the rerun trains nothing
(one line per epoch in the fold's training logs, the same checkpoint file), validates and ends
with the outputs of an uninterrupted run (CPU, deterministic). A test prediction job killed
after some cases keeps them: the rerun predicts only the others.

The uninterrupted run also tracks its fold in MLflow (``tracking.backend: mlflow``, the embedded
store in work_dir) where the extra is installed: its per-epoch metrics are read back with
``mlflow.search_runs`` (issue 49's acceptance, on a run the file makes anyway).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from nnunet_core.layout.results import CHECKPOINT_FINAL, SUMMARY_JSON, VALIDATION_FOLDER
from tests.helpers.tracking import require_tracking_package
from tests.helpers.workflow import (
    DATASET,
    command_below,
    copy_prepared,
    prepared_config,
    snakemake,
    start_snakemake,
    trainer_of_fold,
)

pytestmark = pytest.mark.slow

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"


def config_for(work: Path) -> dict:
    config = prepared_config(work)
    config["deterministic"] = True
    config["training"].update(folds=[0], retries=0, epochs=2)
    return config


def fold(work: Path) -> Path:
    return work / "results" / DATASET / MODEL / "fold_0"


def summary_target(work: Path) -> str:
    return str(fold(work) / VALIDATION_FOLDER / SUMMARY_JSON)


def epoch_lines(folder: Path) -> list[str]:
    lines = []
    for log in sorted(folder.glob("training_log_*.txt")):
        lines += re.findall(r": Epoch (\d+)$", log.read_text(), re.MULTILINE)
    return lines


def start(workdir: Path, config: dict, target: str) -> subprocess.Popen:
    return start_snakemake(workdir, config, target)


def freeze_when_training_finished(run: subprocess.Popen, folder: Path) -> int:
    """The trainer's pid, stopped (SIGSTOP) as soon as its log says training finished."""
    deadline = time.time() + 300
    while time.time() < deadline:
        for log in folder.glob("training_log_*.txt"):
            if "training finished after" in log.read_text():
                pid = trainer_of_fold(DATASET, "0", run.pid)
                assert pid is not None, "no trainer process below snakemake"
                os.kill(pid, signal.SIGSTOP)
                return pid
        if run.poll() is not None:
            pytest.fail(f"snakemake ended before training finished:\n{run.stdout.read()}")
        time.sleep(0.005)
    pytest.fail("training did not finish in 300 s")


@pytest.fixture(scope="module")
def uninterrupted(prepared_work: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = copy_prepared(prepared_work, tmp_path_factory.mktemp("whole") / "work")
    config = config_for(work)
    if importlib.util.find_spec("mlflow") is not None:  # else its test skips (or fails in CI)
        config["tracking"] = {"backend": "mlflow", "tags": {"method": "baseline"}}
    snakemake(work, config, summary_target(work))
    return work


def test_the_workflow_tracks_its_fold_in_mlflow(uninterrupted: Path) -> None:
    require_tracking_package("mlflow")
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{uninterrupted / 'mlflow.db'}")
    (run_id,) = mlflow.search_runs(experiment_names=[DATASET])["run_id"]
    run = mlflow.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["method"] == "baseline"
    assert run.data.tags["model_folder"] == fold(uninterrupted).parent.absolute().as_uri()
    assert run.data.params["training.epochs"] == "2" and run.data.params["deterministic"] == "true"
    assert 0 <= run.data.metrics["val_dice"] <= 1
    client = mlflow.MlflowClient()
    for name in ("train_loss", "val_loss", "pseudo_dice_1", "learning_rate", "data_wait_share"):
        steps = [m.step for m in client.get_metric_history(run_id, name)]
        assert steps == [0, 1], (name, steps)


def test_a_kill_during_final_validation_costs_no_epoch(
    prepared_work: Path, uninterrupted: Path, tmp_path: Path
) -> None:
    work = copy_prepared(prepared_work, tmp_path / "work")
    config = config_for(work)
    folder = fold(work)
    run = start(work, config, summary_target(work))
    pid = freeze_when_training_finished(run, folder)
    summary = folder / VALIDATION_FOLDER / SUMMARY_JSON
    assert not summary.exists(), "the validation had already ended: no kill during it"
    final = folder / CHECKPOINT_FINAL
    before = (final.stat().st_ino, final.read_bytes())
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGCONT)
    output, _ = run.communicate(timeout=120)
    assert run.returncode != 0, output
    assert final.is_file(), "the failed job's checkpoint_final.pth was removed"

    rerun = snakemake(work, config, summary_target(work))
    assert summary.is_file()
    assert (final.stat().st_ino, final.read_bytes()) == before  # the same file, untouched
    assert epoch_lines(folder) == ["0", "1"], "an epoch was trained again"
    assert re.search(
        r"training already finished \(2 epochs\)",
        "".join(log.read_text() for log in folder.glob("training_log_*.txt")),
    ), rerun.stdout
    whole = fold(uninterrupted)
    assert final.read_bytes() != b"" and _weights_equal(final, whole / CHECKPOINT_FINAL)
    assert (
        _json(summary)["foreground_mean"]
        == _json(whole / VALIDATION_FOLDER / SUMMARY_JSON)["foreground_mean"]
    )
    ending = ".nii.gz"
    ours = sorted(p.name for p in (folder / VALIDATION_FOLDER).glob(f"*{ending}"))
    assert ours and ours == sorted(p.name for p in (whole / VALIDATION_FOLDER).glob(f"*{ending}"))
    for name in ours:
        assert _voxels(folder / VALIDATION_FOLDER / name) == _voxels(
            whole / VALIDATION_FOLDER / name
        ), name


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def _weights_equal(first: Path, second: Path) -> bool:
    import torch

    a = torch.load(first, weights_only=False, map_location="cpu")["network_weights"]
    b = torch.load(second, weights_only=False, map_location="cpu")["network_weights"]
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _voxels(path: Path) -> bytes:
    import SimpleITK as sitk

    return sitk.GetArrayFromImage(sitk.ReadImage(str(path))).tobytes()


def predict_process(root: int) -> int | None:
    return command_below(root, lambda argv: "predict" in argv and "-o" in argv)


def test_a_prediction_job_killed_after_a_case_keeps_it(uninterrupted: Path, tmp_path: Path) -> None:
    """Continues the uninterrupted run's work folder (copied) into the test-set prediction."""
    work = tmp_path / "work"
    shutil.copytree(uninterrupted, work, symlinks=True)
    shutil.rmtree(work / ".snakemake", ignore_errors=True)
    config = config_for(work)
    target = str(work / "predictions" / DATASET / "3d_fullres")
    staging = Path(target + ".partial")
    run = start(work, config, target)
    deadline = time.time() + 300
    pid = None
    log = work / "logs" / DATASET / "predict_3d_fullres.log"
    while time.time() < deadline and pid is None:
        # printed once the case's every file (segmentation, npz, json) is written
        if log.is_file() and "predict: case 1/" in log.read_text():
            pid = predict_process(run.pid)
            if pid is not None:
                os.kill(pid, signal.SIGSTOP)
                break
        if run.poll() is not None:
            pytest.fail(f"snakemake ended before a case was written:\n{run.stdout.read()}")
        time.sleep(0.005)
    assert pid is not None, "no case written in 300 s"
    written = {p.name: p.stat().st_ino for p in staging.glob("*.nii.gz")}
    total = len(list((work / "raw").rglob("imagesTs/*_0000.nii.gz")))
    assert 0 < len(written) < total, (written, total)
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGCONT)
    output, _ = run.communicate(timeout=120)
    assert run.returncode != 0, output
    rerun = snakemake(work, config, target)
    folder = Path(target)
    for name, inode in written.items():
        assert (folder / name).stat().st_ino == inode, f"{name} was predicted again"
    assert len(list(folder.glob("*.nii.gz"))) == total
    assert not staging.exists() and not Path(f"{staging}.key").exists()
    assert f"{len(written)} case(s) already predicted" in log.read_text(), rerun.stdout
