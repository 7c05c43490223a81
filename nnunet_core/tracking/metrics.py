"""The numbers a tracker receives, from what the trainer already records (pure functions)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any


def epoch_metrics(values: Mapping[str, Sequence[Any]]) -> dict[str, float]:
    """The last epoch of a progress history (``ProgressHistory.values``): losses, pseudo Dice
    per class or region and their mean and EMA, learning rate, epoch time and data-wait share."""
    last = {key: series[-1] for key, series in values.items() if len(series)}
    metrics = {
        "train_loss": last.get("train_losses"),
        "val_loss": last.get("val_losses"),
        "mean_pseudo_dice": last.get("mean_fg_dice"),
        "ema_pseudo_dice": last.get("ema_fg_dice"),
        "learning_rate": last.get("lrs"),
    }
    for index, dice in enumerate(last.get("dice_per_class_or_region", []), start=1):
        metrics[f"pseudo_dice_{index}"] = dice
    if "epoch_end_timestamps" in last and "epoch_start_timestamps" in last:
        metrics["epoch_time_s"] = last["epoch_end_timestamps"] - last["epoch_start_timestamps"]
    wait, compute = last.get("data_wait_seconds"), last.get("compute_seconds")
    if wait is not None and compute is not None:
        metrics["data_wait_share"] = wait / (wait + compute) if wait + compute > 0 else 0.0
    return _finite(metrics)


def validation_metrics(summary: Mapping[str, Any] | None) -> dict[str, float]:
    """The final validation's Dice and IoU (``validation/summary.json``): the foreground mean
    and per label or region; empty without a summary."""
    if not summary:
        return {}
    metrics = {f"val_{name.lower()}": summary["foreground_mean"].get(name) for name in _KEPT}
    for label, values in summary.get("mean", {}).items():
        for name in _KEPT:
            metrics[f"val_{name.lower()}_{_name_part(label)}"] = values.get(name)
    return _finite(metrics)


_KEPT = ("Dice", "IoU")


def _name_part(label: str) -> str:
    """A label or region key as trackers accept it in a metric name: ``(1, 2)`` -> ``1_2``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(label)).strip("_")


def _finite(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Only numbers a tracker accepts: no missing values, no NaN (an empty class's Dice)."""
    return {
        key: float(value)
        for key, value in metrics.items()
        if isinstance(value, (int, float)) and math.isfinite(value)
    }
