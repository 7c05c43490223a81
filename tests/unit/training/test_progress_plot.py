"""progress.png: drawn without touching matplotlib's backend, and redrawn at most every
REDRAW_SECONDS, always after the last epoch and at a stop."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest

from nnunet_core.training.trainer import progress_plot
from nnunet_core.training.trainer.progress import ProgressHistory
from nnunet_core.training.trainer.progress_plot import ProgressPlot, plot_progress


def history_of(epochs: int) -> ProgressHistory:
    history = ProgressHistory()
    for epoch in range(epochs):
        history.log("epoch_start_timestamps", 10.0 * epoch, epoch)
        history.log("train_losses", 1.0 - 0.1 * epoch, epoch)
        history.log("val_losses", 1.1 - 0.1 * epoch, epoch)
        history.log("mean_fg_dice", 0.2 * epoch, epoch)
        history.log("lrs", 0.01 * (1 - epoch / 4) ** 0.9, epoch)
        history.log("epoch_end_timestamps", 10.0 * epoch + 3, epoch)
    return history


def test_progress_png_is_written_without_touching_the_backend(tmp_path: Path) -> None:
    backend = matplotlib.get_backend()
    history = history_of(4)
    target = tmp_path / "progress.png"
    plot_progress(history, target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert matplotlib.get_backend() == backend
    assert [p.name for p in tmp_path.iterdir()] == ["progress.png"]


def test_progress_png_waits_for_a_complete_epoch(tmp_path: Path) -> None:
    plot_progress(ProgressHistory(), tmp_path / "progress.png")
    assert not (tmp_path / "progress.png").exists()


class Clock:
    """``time.monotonic`` of progress_plot, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(progress_plot.time, "monotonic", clock)
    return clock


def pictures(tmp_path: Path, *counts: int) -> dict[bytes, int]:
    """The pictures of these numbers of epochs, by content: to tell which one was drawn."""
    drawn = {}
    for epochs in counts:
        reference = tmp_path / f"reference_{epochs}.png"
        plot_progress(history_of(epochs), reference)
        drawn[reference.read_bytes()] = epochs
    return drawn


def epochs_shown(target: Path, drawn: dict[bytes, int]) -> int | None:
    """How many epochs the picture shows; None when there is none yet."""
    return drawn[target.read_bytes()] if target.exists() else None


def test_short_epochs_are_drawn_every_redraw_seconds_and_after_the_last(tmp_path, clock) -> None:
    drawn = pictures(tmp_path, 1, 2, 3, 4, 5)
    target = tmp_path / "progress.png"
    plot = ProgressPlot(target, redraw_seconds=30)
    shown = []
    for epoch in range(5):  # epochs of 12 s: drawn 36 s in, then after the last (60 s)
        clock.now += 12
        plot.epoch_ended(history_of(epoch + 1), last=epoch == 4)
        shown.append(epochs_shown(target, drawn))
    assert shown == [None, None, 3, 3, 5]


def test_epochs_longer_than_redraw_seconds_are_each_drawn(tmp_path, clock) -> None:
    drawn = pictures(tmp_path, 1, 2)
    target = tmp_path / "progress.png"
    plot = ProgressPlot(target, redraw_seconds=30)
    shown = []
    for epoch in range(2):
        clock.now += 45
        plot.epoch_ended(history_of(epoch + 1), last=False)
        shown.append(epochs_shown(target, drawn))
    assert shown == [1, 2]


def test_a_stop_draws_the_epochs_not_shown_yet(tmp_path, clock) -> None:
    drawn = pictures(tmp_path, 2)
    target = tmp_path / "progress.png"
    plot = ProgressPlot(target, redraw_seconds=30)
    plot.catch_up(history_of(0))  # nothing ended yet: nothing to draw
    assert epochs_shown(target, drawn) is None
    for epoch in range(2):
        clock.now += 5
        plot.epoch_ended(history_of(epoch + 1), last=False)
    assert epochs_shown(target, drawn) is None
    plot.catch_up(history_of(2))
    assert epochs_shown(target, drawn) == 2


def test_a_rank_that_is_not_the_first_draws_nothing(tmp_path, clock) -> None:
    target = tmp_path / "progress.png"
    plot = ProgressPlot(target, enabled=False, redraw_seconds=30)
    clock.now += 45
    plot.epoch_ended(history_of(1), last=False)
    plot.epoch_ended(history_of(2), last=True)
    plot.catch_up(history_of(2))
    assert not target.exists()
