"""``progress.png``: losses and pseudo Dice, epoch time (data wait, compute, GPU memory) and the
learning rate, per epoch, as upstream draws it.

Upstream redraws it after every epoch. A drawing costs about 0.25 CPU s, nothing beside an epoch
of a minute on a GPU but a tenth of a short CPU epoch (the demo's), so ``ProgressPlot`` redraws
at most every ``REDRAW_SECONDS`` and always after the last epoch and at a stop: the picture a
person opens is never older than that, and a finished or stopped fold's shows every epoch.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnunet_core.io.atomic import atomic_path
from nnunet_core.training.trainer.progress import ProgressHistory

REDRAW_SECONDS = 30.0


class ProgressPlot:
    """``progress.png`` of one training process, redrawn at most every ``redraw_seconds``
    (the first time that long after the start); ``enabled`` False draws nothing (DDP: the
    ranks but the first)."""

    def __init__(
        self, target: Path, enabled: bool = True, redraw_seconds: float = REDRAW_SECONDS
    ) -> None:
        self.target = target
        self.enabled = enabled
        self.redraw_seconds = redraw_seconds
        self._drawn_at = time.monotonic()
        self._behind = False  # epochs ended since the last drawing

    def epoch_ended(self, history: ProgressHistory, last: bool) -> None:
        """After each epoch: draw when it is the last one or the picture is old enough."""
        if last or time.monotonic() - self._drawn_at >= self.redraw_seconds:
            self.draw(history)
        else:
            self._behind = True

    def catch_up(self, history: ProgressHistory) -> None:
        """Before the process stops early: draw the epochs the picture does not show yet."""
        if self._behind:
            self.draw(history)

    def draw(self, history: ProgressHistory) -> None:
        if self.enabled:
            plot_progress(history, self.target)
        self._drawn_at = time.monotonic()
        self._behind = False


def _numbers(series: Sequence[Any], n: int) -> list[float]:
    """The first ``n`` values as floats, NaN where None or missing."""
    padded = list(series[:n]) + [None] * (n - len(series[:n]))
    return [math.nan if v is None else float(v) for v in padded]


def _plot_timing(time_ax: Any, values: dict[str, list[Any]], n: int) -> None:
    """Data wait and compute beside the epoch duration; peak GPU memory on a second axis."""
    epochs = list(range(n))
    time_ax.plot(epochs, _numbers(values["compute_seconds"], n), "g-", label="compute")
    time_ax.plot(epochs, _numbers(values["data_wait_seconds"], n), "r-", label="data wait")
    memory = _numbers(values["peak_gpu_memory_mb"], n)
    if any(not math.isnan(m) for m in memory):
        memory_ax = time_ax.twinx()
        memory_ax.plot(epochs, memory, "k:", label="peak GPU memory")
        memory_ax.set_ylabel("peak GPU memory [MB]")
        memory_ax.legend(loc=(0.7, 1))


def plot_progress(history: ProgressHistory, target: str | os.PathLike) -> None:
    """Write ``progress.png`` (atomically): losses + pseudo Dice/EMA, epoch time, learning rate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values = history.values
    n = min(len(values["train_losses"]), len(values["epoch_end_timestamps"]))
    if n == 0:
        return
    epochs = list(range(n))
    figure = Figure(figsize=(10, 12), dpi=80)
    FigureCanvasAgg(figure)
    loss_ax, time_ax, lr_ax = figure.subplots(3, 1)
    loss_ax.plot(epochs, values["train_losses"][:n], color="b", label="loss_tr")
    loss_ax.plot(epochs, values["val_losses"][:n], color="r", label="loss_val")
    dice_ax = loss_ax.twinx()
    dice_ax.plot(epochs, values["mean_fg_dice"][:n], "g:", label="pseudo dice")
    dice_ax.plot(epochs, values["ema_fg_dice"][:n], "g-", label="pseudo dice (mov. avg.)")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("loss")
    dice_ax.set_ylabel("pseudo dice")
    loss_ax.legend(loc=(0, 1))
    dice_ax.legend(loc=(0.2, 1))
    durations = [
        end - start
        for start, end in zip(
            values["epoch_start_timestamps"][:n], values["epoch_end_timestamps"][:n], strict=True
        )
    ]
    time_ax.plot(epochs, durations, color="b", label="epoch duration")
    _plot_timing(time_ax, values, n)
    time_ax.set_xlabel("epoch")
    time_ax.set_ylabel("time [s]")
    time_ax.legend(loc=(0, 1), ncols=3)
    lr_ax.plot(epochs, values["lrs"][:n], color="b", label="learning rate")
    lr_ax.set_xlabel("epoch")
    lr_ax.set_ylabel("learning rate")
    lr_ax.legend(loc=(0, 1))
    # fixed margins, room for the legends above each plot and the right-hand axes: a layout
    # engine measures every text first, a third of a drawing redone each epoch
    figure.subplots_adjust(left=0.08, right=0.9, bottom=0.05, top=0.94, hspace=0.42)
    with atomic_path(target, suffix=".png") as tmp:
        figure.savefig(tmp)
