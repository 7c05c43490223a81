"""The fold lifecycle (``training.fold.run``) in process, with real components on tiny folds.

One fold is stopped by its deadline after epoch 0, continued with ``--c`` and finished; the
tests then check what each step left behind: the order (resume before the provenance attempt,
validation only after a finished fit, cleanup last), the lock, and the ``--val`` path. The
dataset is conftest's ``env`` (real commands); folds train 3 epochs of 2 iterations.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from nnunet_core import TrainerSettings
from nnunet_core.cluster.process_topology import SINGLE_PROCESS, Topology
from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.results import FOLD_LOCK_NAME as LOCK_NAME
from nnunet_core.layout.roots import Roots
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.training.fold.lock import FoldLock, FoldLockedError
from nnunet_core.training.fold.run import FoldFlags, FoldRequest, run_fold, takes_lock
from tests.helpers.training import CONFIG, DATASET, MODEL

pytestmark = pytest.mark.slow

SETTINGS = TrainerSettings(num_epochs=3, num_iterations=2, num_val_iterations=1, num_workers=0)
# now + epoch + margin > deadline after the first epoch: a stop after epoch 0, whatever the speed
STOP_AFTER_FIRST_EPOCH = {"deadline": "3600", "stop_margin": 1e7}


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Tiny convolutions on a shared 2-core machine: more threads only slow them down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def request(
    env: dict[str, str], results: Path, fold: int = 0, settings: TrainerSettings = SETTINGS, **flags
) -> FoldRequest:
    roots = Roots.from_env(env["nnUNet_raw"], env["nnUNet_preprocessed"], results)
    return FoldRequest(
        roots=roots,
        dataset=DATASET,
        configuration=CONFIG,
        fold=fold,
        plans="nnUNetPlans",
        settings=settings,
        device=torch.device("cpu"),
        flags=FoldFlags(**flags),
        arguments={"fold": str(fold), **flags},
    )


def run_quietly(req: FoldRequest, stops: bool = False) -> str:
    """``run_fold`` with its stdout captured; returns what it printed. ``stops``: the fit stops
    early, and ``run_fold`` returns ``EXIT_STOPPED``."""
    out = io.StringIO()
    with one_thread(), contextlib.redirect_stdout(out):
        assert run_fold(req) == (EXIT_STOPPED if stops else 0)
    return out.getvalue()


def attempts(folder: Path) -> list[tuple[str, int, int]]:
    record = json.loads((folder / "provenance.json").read_text())
    return [(a["status"], a["start_epoch"], a["end_epoch"]) for a in record["attempts"]]


def logs(folder: Path) -> str:
    return "".join(p.read_text() for p in sorted(folder.glob("training_log_*.txt")))


@pytest.fixture(scope="module")
def lifecycle(env, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Fold 0: stopped by the deadline after epoch 0, then continued with ``--c`` to the end."""
    results = tmp_path_factory.mktemp("results")
    folder = results / DATASET / MODEL / "fold_0"
    seen: dict = {"env": env, "results": results, "folder": folder}
    seen["stop_output"] = run_quietly(request(env, results, **STOP_AFTER_FIRST_EPOCH), stops=True)
    seen["stopped_names"] = {p.name for p in folder.iterdir()}
    seen["stopped_attempts"] = attempts(folder)
    seen["stopped_latest"] = torch.load(folder / ckpt.LATEST, weights_only=True)
    lock = FoldLock(folder)
    lock.acquire()  # raises if the stopped run still held it
    lock.release()
    seen["resume_output"] = run_quietly(request(env, results, resume=True))
    return seen


def test_a_stopped_fit_keeps_latest_and_does_not_validate(lifecycle: dict) -> None:
    names = lifecycle["stopped_names"]
    assert "stopped at epoch 0 by deadline" in lifecycle["stop_output"]
    assert ckpt.LATEST in names and ckpt.FINAL not in names
    assert "validation" not in names
    assert LOCK_NAME in names  # the file stays; the lock itself was released (fixture took it)
    assert lifecycle["stopped_latest"]["current_epoch"] == 1
    assert lifecycle["stopped_attempts"] == [("stopped", 0, 1)]
    assert (lifecycle["folder"].parent / "plans.json").is_file()  # model files before the fit


def test_resume_continues_from_latest_and_records_a_second_attempt(lifecycle: dict) -> None:
    folder = lifecycle["folder"]
    assert f"continuing from {folder / ckpt.LATEST} at epoch 1" in logs(folder)
    final = torch.load(folder / ckpt.FINAL, weights_only=True)
    assert final["current_epoch"] == 3
    before = lifecycle["stopped_latest"]["logging"]["train_losses"]
    assert final["logging"]["train_losses"][:1] == before  # epoch 0 kept, not retrained
    # the checkpoint was loaded before the attempt opened: it starts at epoch 1
    assert attempts(folder) == [("stopped", 0, 1), ("finished", 1, 3)]
    config = json.loads((folder / "provenance.json").read_text())["config"]
    assert config["arguments"] == {"fold": "0", "resume": True}
    assert config["trainer"]["num_epochs"] == 3


def test_a_finished_fold_is_validated_then_cleaned_up(lifecycle: dict) -> None:
    folder = lifecycle["folder"]
    names = {p.name for p in folder.iterdir()}
    assert (folder / "validation" / "summary.json").is_file()
    assert ckpt.LATEST not in names and LOCK_NAME not in names
    assert "Mean Validation Dice" in lifecycle["resume_output"]
    # the workflow counts a fold with summary.json as done: a kill after it must leave nothing to
    # do (found by the fault campaign: checkpoint_latest and a 'running' provenance stayed)
    summary = folder / "validation" / "summary.json"
    others = {
        p.name: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file() and p != summary
    }
    assert all(mtime <= summary.stat().st_mtime_ns for mtime in others.values()), others


def test_val_redoes_the_validation_without_lock_or_attempt(lifecycle: dict) -> None:
    folder = lifecycle["folder"]
    summary = folder / "validation" / "summary.json"
    before = json.loads(summary.read_text())
    shutil.rmtree(folder / "validation")
    run_quietly(request(lifecycle["env"], lifecycle["results"], validate_only=True))
    assert json.loads(summary.read_text()) == before
    assert not (folder / LOCK_NAME).exists()
    assert attempts(folder) == [("stopped", 0, 1), ("finished", 1, 3)]


def test_val_without_checkpoint_final_is_a_one_line_error(env, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="training is not finished yet") as info:
        run_fold(request(env, tmp_path, fold=1, validate_only=True))
    assert "\n" not in str(info.value)
    assert not (tmp_path / DATASET).exists()  # nothing written: no lock, no provenance


def test_pretrained_weights_start_a_fresh_attempt(lifecycle: dict, tmp_path: Path) -> None:
    source = lifecycle["folder"] / ckpt.FINAL
    one_epoch = TrainerSettings(num_epochs=1, num_iterations=1, num_val_iterations=1, num_workers=0)
    req = request(lifecycle["env"], tmp_path, 1, one_epoch, pretrained_weights=str(source))
    run_quietly(req)
    folder = tmp_path / DATASET / MODEL / "fold_1"
    log = logs(folder)
    assert f"loaded pretrained weights from {source}; not loaded (upstream's rule" in log
    assert "segmentation heads start fresh): decoder.heads.0.weight, decoder.heads.0.bias" in log
    assert attempts(folder) == [("finished", 0, 1)]


def test_a_held_lock_stops_the_run_before_training_whatever_rank_says(
    env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock decision is the topology's: a plain process locks even with RANK=1 set."""
    monkeypatch.setenv("RANK", "1")
    folder = tmp_path / DATASET / MODEL / "fold_2"
    holder = FoldLock(folder)
    holder.acquire()
    try:
        with pytest.raises(FoldLockedError, match="already being trained"):
            run_fold(request(env, tmp_path, fold=2))
    finally:
        holder.release()
    assert {p.name for p in folder.iterdir()} == {LOCK_NAME}  # no log, provenance, checkpoint


def test_only_the_main_process_of_a_training_locks() -> None:
    assert takes_lock(SINGLE_PROCESS, FoldFlags())
    assert takes_lock(Topology(global_rank=0, world_size=2), FoldFlags())
    assert not takes_lock(Topology(global_rank=1, world_size=2), FoldFlags())
    assert not takes_lock(SINGLE_PROCESS, FoldFlags(validate_only=True))


def test_a_checkpoint_latest_written_at_a_new_best_knows_that_best(env, tmp_path: Path) -> None:
    """Stopped right after an epoch that set a new best EMA (save_every 1): ``--c`` must compare
    the next epochs with that best, or it saves a 'new best' the uninterrupted run does not."""
    every_epoch = TrainerSettings(
        num_epochs=3, num_iterations=2, num_val_iterations=1, num_workers=0, save_every=1
    )
    run_quietly(request(env, tmp_path, 3, every_epoch, **STOP_AFTER_FIRST_EPOCH), stops=True)
    folder = tmp_path / DATASET / MODEL / "fold_3"
    latest = torch.load(folder / ckpt.LATEST, weights_only=True)
    best = torch.load(folder / ckpt.BEST, weights_only=True)
    first_ema = latest["logging"]["ema_fg_dice"][0]
    assert latest["_best_ema"] == pytest.approx(first_ema) == best["_best_ema"]
