"""Folds trained with tracking on, through the real ``nnunet-core train`` on the tiny dataset:
upstream's W&B switches (``nnUNet_wandb_enabled``, ``nnUNet_wandb_project``) with
``WANDB_MODE=offline`` write an offline run in the fold's folder; a tracking server that cannot be
reached costs one warning line, not the fold. MLflow's per-epoch metrics of a workflow run:
test_finished_training_kept.py; the back-ends and a missing package: tests/unit/tracking.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.tracking import require_tracking_package
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli

pytestmark = pytest.mark.slow

SCHEDULE = ["--epochs", "2", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0"]


def train(env: dict[str, str], fold: str, *flags: str):
    return check(cli(env, "train", "900", CONFIG, fold, "-device", "cpu", *SCHEDULE, *flags))


def test_upstreams_wandb_switches_write_an_offline_run(env: dict[str, str]) -> None:
    require_tracking_package("wandb")
    switches = {"nnUNet_wandb_enabled": "1", "nnUNet_wandb_project": "lab", "WANDB_MODE": "offline"}
    train({**env, **switches, "WANDB_SILENT": "true"}, "1")
    fold = Path(env["nnUNet_results"]) / DATASET / MODEL / "fold_1"
    (run,) = (fold / "wandb").glob("offline-run-*")
    records = next(run.glob("run-*.wandb")).read_bytes()
    for text in ("lab", "train_loss", "val_dice", "epoch_time_s"):
        assert text.encode() in records, text
    assert (fold / "validation" / "summary.json").is_file()


def test_an_unreachable_tracking_server_costs_one_line_not_the_fold(env: dict[str, str]) -> None:
    require_tracking_package("mlflow")
    no_retries = {**env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}  # a user's setting wins
    result = train(no_retries, "2", "--tracking", "mlflow", "--tracking-uri", "http://127.0.0.1:9")
    warnings = [line for line in result.stderr.splitlines() if "experiment tracking" in line]
    assert len(warnings) == 1 and "is off for this fold, which trains on" in warnings[0]
    fold = Path(env["nnUNet_results"]) / DATASET / MODEL / "fold_2"
    assert (fold / "validation" / "summary.json").is_file()
