"""What a training records per epoch, the pseudo Dice it monitors, its log file and progress.png.

After each epoch the log gets upstream's lines (``train_loss``, ``val_loss``, ``Pseudo dice``,
``Epoch time``), then ``Data wait: 0.31 s, compute: 1.95 s (14 % of the training iterations
waiting for data)`` (``; peak GPU memory 5120 MB`` on CUDA) and
``epoch i/N: 2.41 s; ETA 0:03:10 (about 2026-12-02 21:14)``.

``progress_plot`` draws the history as ``progress.png``.

The history has upstream's keys (one value per epoch): ``mean_fg_dice``, ``ema_fg_dice``,
``dice_per_class_or_region``, ``train_losses``, ``val_losses``, ``lrs``,
``epoch_start_timestamps``, ``epoch_end_timestamps``; and ours (``training.trainer.epoch_timing``):
the training iterations' ``data_wait_seconds``, ``compute_seconds`` and ``peak_gpu_memory_mb`` (None
off CUDA). It holds only floats, None and lists, so it goes into a checkpoint as is and a resumed
run continues its curves; a checkpoint without our keys (older, or upstream's) gets None for
them. The pseudo Dice is the "global" Dice of the validation iterations: TP/FP/FN of the argmax
summed over all validation batches.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.runtime.case_progress import format_duration
from nnunet_core.training.loss import regions_one_hot
from nnunet_core.training.trainer.epoch_timing import EpochTiming

EMA_DECAY = 0.9
ETA_WINDOW = 5  # recent epochs the ETA averages
# A CPU run this long gets one warning with its cost (the demo's 3 epochs get none).
CPU_WARNING_MIN_EPOCHS = 50
KEYS = (
    "mean_fg_dice",
    "ema_fg_dice",
    "dice_per_class_or_region",
    "train_losses",
    "val_losses",
    "lrs",
    "epoch_start_timestamps",
    "epoch_end_timestamps",
)
# ours, one value per epoch like upstream's, so upstream's plot (shortest list) still works
TIMING_KEYS = ("data_wait_seconds", "compute_seconds", "peak_gpu_memory_mb")
ALL_KEYS = KEYS + TIMING_KEYS


class ProgressHistory:
    """Per-epoch values; logging ``mean_fg_dice`` also logs its EMA (0.9 old + 0.1 new).

    The first EMA is the first value as is; a NaN pseudo Dice (no foreground in any validation
    batch) leaves the EMA where it was instead of poisoning every later value.
    """

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {key: [] for key in ALL_KEYS}

    def log(self, key: str, value: Any, epoch: int) -> None:
        """Record ``value`` for ``epoch``; logging an epoch again replaces its value."""
        if key not in self.values:
            msg = f"unknown progress key {key!r} (known: {', '.join(ALL_KEYS)})"
            raise ConfigurationError(msg)
        series = self.values[key]
        if epoch > len(series) or epoch < 0:
            msg = f"cannot log {key} for epoch {epoch}: {len(series)} epoch(s) recorded so far"
            raise ConfigurationError(msg)
        if epoch == len(series):
            series.append(value)
        else:
            series[epoch] = value
        if key == "mean_fg_dice":
            self.log("ema_fg_dice", self._ema(float(value), epoch), epoch)

    def _ema(self, value: float, epoch: int) -> float:
        previous = self.values["ema_fg_dice"][epoch - 1] if epoch > 0 else math.nan
        if math.isnan(previous):
            return value
        if math.isnan(value):
            return previous
        return EMA_DECAY * previous + (1 - EMA_DECAY) * value

    def last(self, key: str, default: Any = None) -> Any:
        series = self.values[key]
        return series[-1] if series else default

    def num_complete_epochs(self) -> int:
        """Epochs with an end timestamp (what a resume may keep)."""
        return len(self.values["epoch_end_timestamps"])

    def truncate(self, num_epochs: int) -> None:
        """Forget everything from epoch ``num_epochs`` on (a resume repeats those epochs)."""
        for series in self.values.values():
            del series[num_epochs:]

    def state_dict(self) -> dict[str, list[Any]]:
        return {key: list(series) for key, series in self.values.items()}

    def load_state_dict(self, state: dict[str, list[Any]]) -> None:
        """Upstream's keys as recorded; ours padded with None to the epochs recorded."""
        for key in KEYS:
            self.values[key] = list(state.get(key, []))
        epochs = max(len(self.values[key]) for key in KEYS)
        for key in TIMING_KEYS:
            series = list(state.get(key, []))[:epochs]
            self.values[key] = series + [None] * (epochs - len(series))

    def log_timing(self, timing: EpochTiming, epoch: int) -> None:
        """Record one epoch's data wait, compute and peak GPU memory."""
        self.log("data_wait_seconds", timing.data_wait, epoch)
        self.log("compute_seconds", timing.compute, epoch)
        self.log("peak_gpu_memory_mb", timing.peak_gpu_memory_mb, epoch)


def pseudo_dice_counts(
    output: torch.Tensor,
    target: torch.Tensor,
    regions: Sequence[Sequence[int]] | None = None,
    ignore_label: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TP/FP/FN per foreground class (or region) of one batch, summed over batch and space.

    ``output`` are logits ``(B, C, *spatial)``, ``target`` a label map ``(B, 1, *spatial)``.
    Labels: the argmax one-hot without background; regions: sigmoid > 0.5 against the region
    one-hot of the label map. Voxels with the ignore label count nowhere.
    """
    with torch.no_grad():
        if target.ndim == output.ndim - 1:
            target = target[:, None]
        labels = target.long()
        if regions is not None:
            if len(regions) != output.shape[1]:
                msg = f"{len(regions)} regions but the network has {output.shape[1]} outputs"
                raise ConfigurationError(msg)
            predicted = output.sigmoid() > 0.5
            reference = regions_one_hot(labels, regions).bool()
        else:
            classes = torch.arange(1, output.shape[1], device=output.device)
            view = (1, -1) + (1,) * (output.ndim - 2)
            predicted = output.argmax(1, keepdim=True) == classes.view(view)
            reference = labels == classes.view(view)
        if ignore_label is not None:
            annotated = labels != ignore_label
            predicted = predicted & annotated
            reference = reference & annotated
        axes = [0, *range(2, output.ndim)]
        tp = (predicted & reference).sum(axes)
        fp = (predicted & ~reference).sum(axes)
        fn = (~predicted & reference).sum(axes)
    return tp.cpu().numpy(), fp.cpu().numpy(), fn.cpu().numpy()


def global_dice(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> list[float]:
    """``2tp / (2tp + fp + fn)`` per class; NaN where a class is absent from both."""
    tp, fp, fn = (np.asarray(a, dtype=np.float64) for a in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        dice = np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), np.nan)
    return [float(d) for d in dice]


def nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


class TrainingLog:
    """``training_log_<date>.txt`` in the fold folder: timestamped lines, also printed.

    Each line is appended and the file closed again, so the log survives a kill.
    """

    def __init__(self, folder: str | os.PathLike, enabled: bool = True, echo: bool = True) -> None:
        now = datetime.now()
        name = (
            f"training_log_{now.year}_{now.month}_{now.day}_"
            f"{now.hour:02d}_{now.minute:02d}_{now.second:02d}.txt"
        )
        self.path = Path(folder) / name
        self.enabled = enabled
        self.echo = echo
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, *parts: Any) -> None:
        line = " ".join(str(p) for p in parts)
        stamped = f"{datetime.now().isoformat(sep=' ', timespec='seconds')}: {line}"
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(stamped + "\n")
        if self.echo and self.enabled:
            print(stamped, file=sys.stdout, flush=True)


def eta_seconds(
    durations: Sequence[float], remaining: int, window: int = ETA_WINDOW
) -> float | None:
    """Seconds left for ``remaining`` epochs: their count times the mean of the recent epochs.

    ``durations`` are this attempt's epoch wall times, oldest first. The first is dropped once
    there are later ones: it also holds the start-up (workers, cudnn benchmark, compile) and
    would inflate every estimate. Only the last ``window`` count, so a slowdown shows soon.
    None when nothing was measured yet.
    """
    if remaining <= 0:
        return 0.0
    usable = list(durations[1:] if len(durations) > 1 else durations)[-window:]
    if not usable:
        return None
    return remaining * sum(usable) / len(usable)


def epoch_line(
    epoch: int, num_epochs: int, seconds: float, eta: float | None, now: datetime
) -> str:
    """``epoch i/N`` (1-based), the epoch's time, the fold's ETA and when that is on the clock."""
    line = f"epoch {epoch + 1}/{num_epochs}: {seconds:.2f} s"
    if epoch + 1 >= num_epochs:
        return f"{line}; all epochs done"
    if eta is None:
        return line
    finish = now + timedelta(seconds=eta)
    return f"{line}; ETA {format_duration(eta)} (about {finish:%Y-%m-%d %H:%M})"


class EpochEta:
    """Wall time per epoch of this attempt (a resumed run ignores earlier attempts' epochs).

    The ETA uses the wall time from the previous ``epoch_done`` (or ``restart``) to this one,
    which includes checkpoint writing and plotting: the remaining epochs pay for those too.
    """

    def __init__(
        self, num_epochs: int, clock: Callable[[], float] = time.time, on_cpu: bool = False
    ) -> None:
        self.num_epochs = num_epochs
        self.clock = clock
        self.on_cpu = on_cpu
        self.durations: list[float] = []
        self._last = clock()

    def restart(self) -> None:
        """The first epoch's wall time starts now (the loop begins, its data workers are up)."""
        self._last = self.clock()

    def epoch_done(self, epoch: int, seconds: float) -> str:
        """Epoch ``epoch`` (0-based, ``seconds`` of training and validation) finished now.

        Returns its ``epoch i/N`` line.
        """
        now = self.clock()
        self.durations.append(now - self._last)
        self._last = now
        eta = eta_seconds(self.durations, self.num_epochs - epoch - 1)
        return epoch_line(epoch, self.num_epochs, seconds, eta, datetime.fromtimestamp(now))

    def cpu_warning(self, epoch: int) -> str | None:
        """Once, after the first epoch of a long attempt on the CPU: what the fold will cost."""
        remaining = self.num_epochs - epoch - 1
        if not self.on_cpu or len(self.durations) != 1 or remaining < CPU_WARNING_MIN_EPOCHS:
            return None
        seconds = self.durations[0]
        return (
            f"warning: training on the CPU (torch sees no CUDA device): one epoch takes "
            f"{seconds:.0f} s here, the {remaining} epochs left about "
            f"{format_duration(seconds * remaining)} (h:mm:ss); a GPU is typically 10-50x faster"
        )


def log_epoch_end(
    log: TrainingLog,
    history: ProgressHistory,
    eta: EpochEta,
    epoch: int,
    timing: EpochTiming | None = None,
) -> None:
    """The lines upstream prints after an epoch (tests, SLURM checks and the report grep them),
    then ours: the data wait and compute of the training iterations, ``epoch i/N`` with the
    fold's ETA."""
    values = history.values
    log("train_loss", round(values["train_losses"][-1], 4))
    log("val_loss", round(values["val_losses"][-1], 4))
    log("Pseudo dice", [round(d, 4) for d in values["dice_per_class_or_region"][-1]])
    duration = values["epoch_end_timestamps"][-1] - values["epoch_start_timestamps"][-1]
    log(f"Epoch time: {duration:.2f} s")
    if timing is not None:
        log(timing.line())
    log(eta.epoch_done(epoch, duration))
    warning = eta.cpu_warning(epoch)
    if warning:
        log(warning)
