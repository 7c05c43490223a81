"""The two back-ends against their real packages: what a fold reports is what MLflow's
``search_runs`` and W&B's offline run folder hold; a failing back-end never fails the caller."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.tracking import NO_TRACKER, TrackingChoice, epoch_metrics, open_tracker
from nnunet_core.tracking.choice import MLFLOW_DB
from tests.helpers.tracking import require_tracking_package

SETTINGS = {"dataset": "Dataset900_Synth", "seed": 3, "optimizer": {"lr": 0.01}, "fold": "0"}
HISTORY = {
    "train_losses": [0.9, 0.7],
    "val_losses": [0.8, 0.6],
    "dice_per_class_or_region": [[0.1, float("nan")], [0.5, 0.25]],
    "mean_fg_dice": [0.1, 0.375],
    "ema_fg_dice": [0.1, 0.13],
    "lrs": [0.01, 0.005],
    "epoch_start_timestamps": [0.0, 10.0],
    "epoch_end_timestamps": [9.0, 14.0],
    "data_wait_seconds": [1.0, 1.0],
    "compute_seconds": [3.0, 1.0],
}


def first_epochs(n: int) -> dict:
    return {key: series[:n] for key, series in HISTORY.items()}


def report_a_fold(tracker, folder: Path) -> None:
    tracker.start_fold("fold_0", SETTINGS)
    tracker.log_epoch(0, epoch_metrics(first_epochs(1)))
    tracker.log_epoch(1, epoch_metrics(first_epochs(2)))
    tracker.end_fold({"val_dice": 0.42}, folder, "finished")


def test_epoch_metrics_name_every_number_and_drop_nan() -> None:
    metrics = epoch_metrics(HISTORY)
    assert metrics == {
        "train_loss": 0.7,
        "val_loss": 0.6,
        "mean_pseudo_dice": 0.375,
        "ema_pseudo_dice": 0.13,
        "learning_rate": 0.005,
        "pseudo_dice_1": 0.5,
        "pseudo_dice_2": 0.25,
        "epoch_time_s": 4.0,
        "data_wait_share": 0.5,
    }
    assert "pseudo_dice_2" not in epoch_metrics(first_epochs(1))  # NaN: an empty class


def test_mlflow_records_per_epoch_metrics_settings_and_the_model_folder(tmp_path: Path) -> None:
    require_tracking_package("mlflow")
    import mlflow

    warnings: list[str] = []
    choice = TrackingChoice("mlflow", experiment="synth", tags={"method": "baseline"})
    tracker = open_tracker(choice, warnings.append, tmp_path, tmp_path)
    report_a_fold(tracker, tmp_path / "fold_0")
    assert warnings == []
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / MLFLOW_DB}")
    runs = mlflow.search_runs(experiment_names=["synth"])
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["status"] == "FINISHED"
    assert run["tags.mlflow.runName"] == "fold_0"
    assert run["tags.method"] == "baseline"
    assert run["tags.model_folder"] == (tmp_path / "fold_0").as_uri()
    assert run["params.optimizer.lr"] == "0.01"
    assert run["metrics.val_dice"] == 0.42
    history = mlflow.MlflowClient().get_metric_history(run["run_id"], "train_loss")
    assert [(m.step, m.value) for m in history] == [(0, 0.9), (1, 0.7)]


def test_wandb_offline_writes_a_run_folder_with_the_epochs(tmp_path: Path, monkeypatch) -> None:
    require_tracking_package("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    warnings: list[str] = []
    choice = TrackingChoice("wandb", experiment="synth", mode="offline")
    tracker = open_tracker(choice, warnings.append, tmp_path, tmp_path)
    report_a_fold(tracker, tmp_path / "fold_0")
    assert warnings == []
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, list((tmp_path / "wandb").iterdir())
    records = next(runs[0].glob("run-*.wandb")).read_bytes()  # W&B's record log, to sync
    for text in ("train_loss", "pseudo_dice_2", "val_dice", (tmp_path / "fold_0").as_uri()):
        assert text.encode() in records, text


def test_a_failing_backend_warns_once_and_goes_quiet(tmp_path: Path) -> None:
    require_tracking_package("mlflow")
    warnings: list[str] = []
    choice = TrackingChoice("mlflow", uri="unknown-scheme://nowhere", experiment="x")
    tracker = open_tracker(choice, warnings.append, tmp_path, tmp_path)
    report_a_fold(tracker, tmp_path / "fold_0")  # raises nothing
    assert len(warnings) == 1
    assert warnings[0].startswith("WARNING: experiment tracking (mlflow) failed in start_fold")


def test_backend_none_is_the_tracker_that_does_nothing(tmp_path: Path) -> None:
    assert open_tracker(TrackingChoice(), print, tmp_path, tmp_path) is NO_TRACKER


@pytest.mark.parametrize("enabled", ["1", "0"])
def test_upstreams_wandb_switches_choose_wandb_and_its_project(monkeypatch, enabled) -> None:
    monkeypatch.setenv("nnUNet_wandb_enabled", enabled)
    monkeypatch.setenv("nnUNet_wandb_project", "lab")
    choice = TrackingChoice.of_command(None)
    assert (choice.backend, choice.experiment) == (
        ("wandb", "lab") if enabled == "1" else ("none", None)
    )
