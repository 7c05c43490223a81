"""Progress history (EMA), pseudo Dice, the log file, epoch i/N with the ETA."""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path

import pytest
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.trainer.progress import (
    EpochEta,
    ProgressHistory,
    TrainingLog,
    epoch_line,
    eta_seconds,
    global_dice,
    log_epoch_end,
    nanmean,
    pseudo_dice_counts,
)


def test_ema_starts_with_the_first_value_then_decays() -> None:
    history = ProgressHistory()
    history.log("mean_fg_dice", 0.5, 0)
    history.log("mean_fg_dice", 0.7, 1)
    history.log("mean_fg_dice", 0.1, 2)
    ema = history.values["ema_fg_dice"]
    assert ema[0] == 0.5
    assert ema[1] == pytest.approx(0.9 * 0.5 + 0.1 * 0.7)
    assert ema[2] == pytest.approx(0.9 * ema[1] + 0.1 * 0.1)


def test_nan_pseudo_dice_does_not_poison_the_ema() -> None:
    history = ProgressHistory()
    history.log("mean_fg_dice", math.nan, 0)
    history.log("mean_fg_dice", 0.4, 1)
    history.log("mean_fg_dice", math.nan, 2)
    assert math.isnan(history.values["ema_fg_dice"][0])
    assert history.values["ema_fg_dice"][1:] == [0.4, 0.4]


def test_logging_an_epoch_again_replaces_it_and_gaps_are_errors() -> None:
    history = ProgressHistory()
    history.log("train_losses", 1.0, 0)
    history.log("train_losses", 0.9, 0)
    assert history.values["train_losses"] == [0.9]
    with pytest.raises(ConfigurationError, match="epoch 2"):
        history.log("train_losses", 0.8, 2)
    with pytest.raises(ConfigurationError, match="unknown progress key"):
        history.log("nonsense", 1, 1)


def test_state_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    history = ProgressHistory()
    for epoch in range(3):
        history.log("mean_fg_dice", 0.1 * epoch, epoch)
        history.log("dice_per_class_or_region", [0.1, math.nan], epoch)
        history.log("epoch_end_timestamps", 100.0 + epoch, epoch)
    torch.save({"logging": history.state_dict()}, tmp_path / "c.pth")
    state = torch.load(tmp_path / "c.pth", weights_only=True)["logging"]
    restored = ProgressHistory()
    restored.load_state_dict(state)
    assert restored.values["ema_fg_dice"] == history.values["ema_fg_dice"]
    assert restored.num_complete_epochs() == 3
    restored.truncate(2)
    assert restored.num_complete_epochs() == 2 and len(restored.values["mean_fg_dice"]) == 2


def test_pseudo_dice_counts_of_an_argmax_prediction() -> None:
    # 1 sample, 3 classes, 4 voxels; prediction (argmax) = [0, 1, 1, 2], reference = [0, 1, 2, 2]
    logits = torch.tensor([[[5.0, 0, 0, 0], [0, 5.0, 5.0, 0], [0, 0, 0, 5.0]]])
    target = torch.tensor([[[0, 1, 2, 2]]])
    tp, fp, fn = pseudo_dice_counts(logits, target)
    assert tp.tolist() == [1, 1] and fp.tolist() == [1, 0] and fn.tolist() == [0, 1]
    assert global_dice(tp, fp, fn) == pytest.approx([2 / 3, 2 / 3])


def test_pseudo_dice_ignores_the_ignore_label() -> None:
    logits = torch.tensor([[[0.0, 5.0, 5.0], [5.0, 0, 0]]])  # predicts [1, 0, 0]
    target = torch.tensor([[[2, 0, 1]]])  # voxel 0 is unannotated (ignore label 2)
    tp, fp, fn = pseudo_dice_counts(logits, target, ignore_label=2)
    assert (tp.tolist(), fp.tolist(), fn.tolist()) == ([0], [0], [1])


def test_pseudo_dice_for_regions_uses_sigmoid_and_the_region_one_hot() -> None:
    # regions (1, 2) and (2,); labels [0, 1, 2]; predictions > 0.5 where logits > 0
    logits = torch.tensor([[[-1.0, 1.0, 1.0], [1.0, -1.0, 1.0]]])
    target = torch.tensor([[[0, 1, 2]]])
    tp, fp, fn = pseudo_dice_counts(logits, target, regions=[(1, 2), (2,)])
    assert (tp.tolist(), fp.tolist(), fn.tolist()) == ([2, 1], [0, 1], [0, 0])


def test_global_dice_is_nan_for_a_class_absent_everywhere() -> None:
    dice = global_dice([0, 3], [0, 1], [0, 0])
    assert math.isnan(dice[0]) and dice[1] == pytest.approx(6 / 7)
    assert nanmean(dice) == pytest.approx(6 / 7)
    assert math.isnan(nanmean([math.nan]))


def test_training_log_appends_timestamped_lines(tmp_path: Path, capsys) -> None:
    log = TrainingLog(tmp_path)
    log("epoch", 0)
    log("train_loss", -0.5)
    assert log.path.name.startswith("training_log_") and log.path.suffix == ".txt"
    lines = log.path.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith(": epoch 0") and lines[1].endswith("-0.5")
    assert "train_loss -0.5" in capsys.readouterr().out
    quiet = TrainingLog(tmp_path / "other", enabled=False)
    quiet("nothing")
    assert not quiet.path.exists()


class FakeClock:
    """Returns the given times in order (seconds since the epoch)."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


def test_eta_is_remaining_epochs_times_the_mean_of_recent_epochs() -> None:
    assert eta_seconds([10.0, 2.0, 4.0], remaining=3) == pytest.approx(9.0)  # first: warm-up
    assert eta_seconds([5.0], remaining=2) == pytest.approx(10.0)  # nothing else measured yet
    recent = [100.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 7.0]
    assert eta_seconds(recent, remaining=10, window=5) == pytest.approx(10 * 11 / 5)
    assert eta_seconds([], remaining=4) is None
    assert eta_seconds([3.0, 3.0], remaining=0) == 0.0


def test_epoch_line_is_one_based_with_the_eta_and_the_finish_time() -> None:
    now = datetime(2026, 12, 2, 20, 15, 0)
    line = epoch_line(3, 10, 2.414, eta=3725.0, now=now)
    assert line == "epoch 4/10: 2.41 s; ETA 1:02:05 (about 2026-12-02 21:17)"
    assert epoch_line(9, 10, 2.0, eta=0.0, now=now) == "epoch 10/10: 2.00 s; all epochs done"
    assert epoch_line(0, 10, 2.0, eta=None, now=now) == "epoch 1/10: 2.00 s"


def test_a_resumed_attempt_counts_on_and_estimates_from_its_own_epochs() -> None:
    # continued at epoch 3 of 10; this attempt's epochs take 3 s (the first, warm-up) then 2 s
    eta = EpochEta(10, clock=FakeClock(1000.0, 1000.0, 1003.0, 1005.0))
    eta.restart()
    first = eta.epoch_done(3, 2.9)
    second = eta.epoch_done(4, 1.9)
    assert first.startswith("epoch 4/10: 2.90 s; ETA 0:00:18 (about ")  # 6 left x 3 s
    assert second.startswith("epoch 5/10: 1.90 s; ETA 0:00:10 (about ")  # 5 left x 2 s
    finish = datetime.fromtimestamp(1015.0).strftime("%Y-%m-%d %H:%M")
    assert second.endswith(f"(about {finish})")
    assert eta.durations == [3.0, 2.0]


def test_epoch_end_keeps_upstreams_lines_then_adds_epoch_i_of_n(tmp_path: Path) -> None:
    history = ProgressHistory()
    for key, value in (
        ("epoch_start_timestamps", 100.0),
        ("train_losses", -0.51234),
        ("val_losses", -0.4),
        ("dice_per_class_or_region", [0.8, 0.25]),
        ("epoch_end_timestamps", 102.5),
    ):
        history.log(key, value, 0)
    log = TrainingLog(tmp_path, echo=False)
    log("Epoch 0")
    log_epoch_end(log, history, EpochEta(2, clock=FakeClock(0.0, 3.0)), 0)
    text = log.path.read_text()
    lines = [line.split(": ", 1)[1] for line in text.splitlines()]
    assert lines[1:5] == [
        "train_loss -0.5123",
        "val_loss -0.4",
        "Pseudo dice [0.8, 0.25]",
        "Epoch time: 2.50 s",
    ]
    assert lines[5].startswith("epoch 1/2: 2.50 s; ETA 0:00:03 (about ")
    assert re.findall(r": Epoch (\d+)$", text, re.MULTILINE) == ["0"]  # what the tests grep


def test_a_long_cpu_run_warns_once_with_what_the_fold_will_cost() -> None:
    eta = EpochEta(1000, clock=FakeClock(0.0, 0.0, 300.0, 590.0), on_cpu=True)
    eta.restart()
    eta.epoch_done(0, 290.0)
    warning = eta.cpu_warning(0)
    assert warning == (
        "warning: training on the CPU (torch sees no CUDA device): one epoch takes 300 s here, "
        "the 999 epochs left about 83:15:00 (h:mm:ss); a GPU is typically 10-50x faster"
    )
    eta.epoch_done(1, 290.0)
    assert eta.cpu_warning(1) is None  # once per attempt
    short = EpochEta(3, clock=FakeClock(0.0, 1.0), on_cpu=True)
    short.epoch_done(0, 1.0)
    assert short.cpu_warning(0) is None  # the demo's schedule
    gpu = EpochEta(1000, clock=FakeClock(0.0, 1.0), on_cpu=False)
    gpu.epoch_done(0, 1.0)
    assert gpu.cpu_warning(0) is None
