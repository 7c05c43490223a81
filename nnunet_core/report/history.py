"""A fold's per-epoch training history, read back for the report.

The trainer keeps its ``ProgressHistory`` only inside its checkpoints (key ``logging``), so the
newest checkpoint is the source: final, else latest, else best (the order ``--c`` resumes in).
Only the checkpoint's pickled structure is read, with tensors left out: the report needs no
torch (importing it was a fifth of a small report's time) and never reads network weights. A
checkpoint whose pickle names any other class (an upstream one's numpy numbers) is loaded by
``model.checkpoint.load_checkpoint`` instead, with its allowlist. A fold trained with
``--disable_checkpointing`` has no checkpoint; its ``training_log_*.txt`` files are parsed instead
(losses, pseudo Dice, learning rate, epoch time, data wait and compute; the EMA is recomputed the
trainer's way).
"""

from __future__ import annotations

import collections
import math
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd

from nnunet_core.layout.results import CHECKPOINT_BEST, CHECKPOINT_FINAL, CHECKPOINT_LATEST

TIMING_KEYS = ("data_wait_seconds", "compute_seconds", "peak_gpu_memory_mb")  # the trainer's
CHECKPOINTS = (CHECKPOINT_FINAL, CHECKPOINT_LATEST, CHECKPOINT_BEST)
EMA_DECAY = 0.9  # the trainer's (nnunet_core.training.trainer.progress.EMA_DECAY)
CURVE_COLUMNS = [
    "epoch",
    "train_loss",
    "val_loss",
    "pseudo_dice",
    "ema_pseudo_dice",
    "lr",
    "epoch_seconds",
    "data_wait_seconds",  # the training iterations' (NaN for folds trained before we recorded it)
    "compute_seconds",
    "peak_gpu_memory_mb",  # NaN off CUDA
]
_LOG_LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}: (.*)$")


_TIMING_LINE = re.compile(
    r"^Data wait: (?P<wait>[\d.]+) s, compute: (?P<compute>[\d.]+) s"
    r".*?(?:; peak GPU memory (?P<memory>[\d.]+) MB)?$"
)


def _series(values: dict[str, list[Any]], key: str, n: int) -> list[float]:
    series = [math.nan if v is None else float(v) for v in values.get(key, [])[:n]]
    return series + [math.nan] * (n - len(series))


def history_frame(values: dict[str, list[Any]]) -> pd.DataFrame:
    """One row per epoch that has a training loss, from upstream's ``logging`` keys."""
    n = len(values.get("train_losses", []))
    starts = _series(values, "epoch_start_timestamps", n)
    ends = _series(values, "epoch_end_timestamps", n)
    return pd.DataFrame(
        {
            "epoch": list(range(n)),
            "train_loss": _series(values, "train_losses", n),
            "val_loss": _series(values, "val_losses", n),
            "pseudo_dice": _series(values, "mean_fg_dice", n),
            "ema_pseudo_dice": _series(values, "ema_fg_dice", n),
            "lr": _series(values, "lrs", n),
            "epoch_seconds": [e - s for s, e in zip(starts, ends, strict=True)],
            "data_wait_seconds": _series(values, "data_wait_seconds", n),
            "compute_seconds": _series(values, "compute_seconds", n),
            "peak_gpu_memory_mb": _series(values, "peak_gpu_memory_mb", n),
        },
        columns=CURVE_COLUMNS,
    )


class _TensorlessUnpickler(pickle.Unpickler):
    """A torch checkpoint's pickle (``<archive>/data.pkl``) with every tensor read as None: the
    storages it names are never loaded, and any class but the few a checkpoint of ours holds
    stops the read."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name.startswith("_rebuild_"):
            return _no_tensor
        if module == "torch" and name.endswith("Storage"):
            return None
        msg = f"{module}.{name} is not read without torch"
        raise pickle.UnpicklingError(msg)

    def persistent_load(self, pid: Any) -> None:  # noqa: ARG002 (a storage: not read)
        return None


def _no_tensor(*args: Any, **kwargs: Any) -> None:  # noqa: ARG001
    return None


def _state_without_torch(path: Path) -> Any:
    with zipfile.ZipFile(path) as archive:
        pickled = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pickled) != 1:
            msg = f"{path}: not one data.pkl"
            raise pickle.UnpicklingError(msg)
        with archive.open(pickled[0]) as stream:
            return _TensorlessUnpickler(stream).load()


def history_from_checkpoint(path: Path) -> dict[str, list[Any]] | None:
    """The ``logging`` entry of a checkpoint; None when unreadable or absent."""
    try:
        state = _state_without_torch(path)
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError):
        from nnunet_core.model.checkpoint import CheckpointError, load_checkpoint

        try:
            state = load_checkpoint(path)
        except CheckpointError:  # a torn or foreign file: fall through to the next source
            return None
    logging = state.get("logging") if isinstance(state, dict) else None
    return logging if isinstance(logging, dict) else None


def _ema(values: list[float]) -> list[float]:
    out: list[float] = []
    for value in values:
        previous = out[-1] if out else math.nan
        if math.isnan(previous):
            out.append(value)
        elif math.isnan(value):
            out.append(previous)
        else:
            out.append(EMA_DECAY * previous + (1 - EMA_DECAY) * value)
    return out


def _pseudo_dice(text: str) -> float:
    numbers = [float(x) for x in re.findall(r"nan|[-+]?\d*\.?\d+(?:e[-+]?\d+)?", text)]
    finite = [x for x in numbers if not math.isnan(x)]
    return sum(finite) / len(finite) if finite else math.nan


def history_from_logs(fold_dir: Path) -> dict[str, list[Any]] | None:
    """Per-epoch values parsed from ``training_log_*.txt`` (oldest first; repeats replace)."""
    logs = sorted(fold_dir.glob("training_log_*.txt"), key=lambda p: p.stat().st_mtime)
    rows: dict[int, dict[str, float]] = {}
    epoch: int | None = None
    for log in logs:
        for raw in log.read_text(encoding="utf-8", errors="replace").splitlines():
            match = _LOG_LINE.match(raw)
            if not match:
                continue
            line = match.group(1)
            if line.startswith("Epoch ") and line[6:].strip().isdigit():
                epoch = int(line[6:])
                rows[epoch] = {}
            elif epoch is None:
                continue
            elif line.startswith("train_loss "):
                rows[epoch]["train_losses"] = float(line.split()[1])
            elif line.startswith("val_loss "):
                rows[epoch]["val_losses"] = float(line.split()[1])
            elif line.startswith("Pseudo dice "):
                rows[epoch]["mean_fg_dice"] = _pseudo_dice(line[len("Pseudo dice ") :])
            elif line.startswith("Current learning rate: "):
                rows[epoch]["lrs"] = float(line.split(":")[1])
            elif line.startswith("Epoch time: "):
                rows[epoch]["seconds"] = float(line.split()[2])
            elif timing := _TIMING_LINE.match(line):
                rows[epoch]["data_wait_seconds"] = float(timing["wait"])
                rows[epoch]["compute_seconds"] = float(timing["compute"])
                if timing["memory"]:
                    rows[epoch]["peak_gpu_memory_mb"] = float(timing["memory"])
    done = [rows[e] for e in sorted(rows) if "train_losses" in rows[e]]
    if not done:
        return None
    values: dict[str, list[Any]] = {
        key: [r.get(key, math.nan) for r in done]
        for key in ("train_losses", "val_losses", "mean_fg_dice", "lrs", *TIMING_KEYS)
    }
    values["ema_fg_dice"] = _ema(values["mean_fg_dice"])
    values["epoch_start_timestamps"] = [0.0] * len(done)
    values["epoch_end_timestamps"] = [r.get("seconds", math.nan) for r in done]
    return values


def read_fold_history(fold_dir: Path) -> tuple[pd.DataFrame, str] | None:
    """``(curves, source file name)`` of one fold, or None when nothing records its training."""
    for name in CHECKPOINTS:
        path = fold_dir / name
        if path.is_file():
            values = history_from_checkpoint(path)
            if values:
                return history_frame(values), name
    values = history_from_logs(fold_dir)
    if values:
        return history_frame(values), "training_log_*.txt"
    return None
