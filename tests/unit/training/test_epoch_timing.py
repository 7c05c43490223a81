"""Data wait vs compute per epoch: what the timer measures, how it is recorded and logged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from nnunet_core.report.history import history_from_logs
from nnunet_core.training.trainer.epoch_timing import EpochTimer, EpochTiming
from nnunet_core.training.trainer.progress import (
    KEYS,
    TIMING_KEYS,
    EpochEta,
    ProgressHistory,
    TrainingLog,
    log_epoch_end,
)
from nnunet_core.training.trainer.progress_plot import plot_progress


def slow_batches(count: int, seconds: float):
    for i in range(count):
        time.sleep(seconds)
        yield i


def test_time_blocked_in_next_is_data_wait_and_the_rest_is_compute() -> None:
    timer = EpochTimer(torch.device("cpu"))
    for _ in timer.batches(slow_batches(5, 0.06), 5):
        time.sleep(0.02)  # the "step"
    timing = timer.finish()
    # sleeps never end early; a loaded machine only makes both longer
    assert timing.data_wait >= 5 * 0.06 and timing.compute >= 5 * 0.02
    assert timing.data_wait < 5 * 0.06 + 1.0 and timing.peak_gpu_memory_mb is None
    assert timing.wait_share == pytest.approx(
        timing.data_wait / (timing.data_wait + timing.compute)
    )


def epoch(history: ProgressHistory, index: int, timing: EpochTiming | None = None) -> None:
    for key in ("train_losses", "val_losses", "lrs", "mean_fg_dice"):
        history.log(key, 0.5, index)
    history.log("dice_per_class_or_region", [0.5], index)
    history.log("epoch_start_timestamps", 10.0 * index, index)
    history.log("epoch_end_timestamps", 10.0 * index + 8, index)
    if timing is not None:
        history.log_timing(timing, index)


def test_a_checkpoint_without_timing_resumes_with_none_for_its_epochs() -> None:
    """An older (or upstream's) progress record: our keys get None for its epochs, so the next
    epoch logs at its index and every list keeps one value per epoch (upstream's plot uses the
    shortest list)."""
    old = ProgressHistory()
    for i in range(3):
        epoch(old, i)
    state = {key: old.values[key] for key in KEYS}  # no timing keys at all
    resumed = ProgressHistory()
    resumed.load_state_dict(state)
    assert all(resumed.values[key] == [None] * 3 for key in TIMING_KEYS)
    resumed.truncate(2)  # --c from checkpoint_latest of epoch 2
    epoch(resumed, 2, EpochTiming(1.5, 3.0, None))
    assert {len(series) for series in resumed.values.values()} == {3}
    assert resumed.values["data_wait_seconds"] == [None, None, 1.5]


def test_the_log_line_reads_back_for_folds_without_checkpoints(tmp_path: Path) -> None:
    history = ProgressHistory()
    log = TrainingLog(tmp_path, echo=False)
    eta = EpochEta(2)
    timings = [EpochTiming(0.25, 2.0, None), EpochTiming(1.0, 3.0, 2048.4)]
    for i, timing in enumerate(timings):
        log(f"Epoch {i}")
        epoch(history, i, timing)
        log_epoch_end(log, history, eta, i, timing)
    text = log.path.read_text()
    assert "Data wait: 0.25 s, compute: 2.00 s (11 % of the training iterations waiting" in text
    assert "; peak GPU memory 2048 MB" in text
    parsed = history_from_logs(tmp_path)
    assert parsed is not None
    assert parsed["data_wait_seconds"] == [0.25, 1.0]
    assert parsed["compute_seconds"] == [2.0, 3.0]
    assert parsed["peak_gpu_memory_mb"][1] == 2048.0


@pytest.mark.parametrize("memory", [None, 4096.0])
def test_progress_png_draws_the_timing_with_or_without_gpu_memory(tmp_path, memory) -> None:
    history = ProgressHistory()
    for i in range(3):
        epoch(history, i, EpochTiming(0.5 * i, 2.0, memory))
    plot_progress(history, tmp_path / "progress.png")
    assert (tmp_path / "progress.png").stat().st_size > 10_000


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_each_epoch_records_its_own_peak_memory() -> None:
    device = torch.device("cuda")
    timer = EpochTimer(device)
    big = torch.ones(256 * 2**20, dtype=torch.uint8, device=device)
    del big
    first = timer.finish()
    timer = EpochTimer(device)  # the next epoch starts from the memory in use, not the old peak
    small = torch.ones(16 * 2**20, dtype=torch.uint8, device=device)
    second = timer.finish()
    del small
    assert first.peak_gpu_memory_mb is not None and first.peak_gpu_memory_mb >= 256
    assert second.peak_gpu_memory_mb is not None and 16 <= second.peak_gpu_memory_mb < 256
