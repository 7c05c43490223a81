"""Epochs a fold trained more than once: what a kill after a fold's last epoch must never cost.

A kill during the final validation or the npz export comes after checkpoint_final.pth is saved;
the rerun must go straight to the validation. Each attempt of a fold writes its own
``training_log_*.txt``, one ": Epoch N" line per epoch started, so an epoch trained again shows
as a number found twice in the fold's logs. (A kill inside an epoch legitimately repeats that
epoch: the check applies to the moments after training, ``POST_TRAINING``.)
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from benchmarks.faults.stages import FINAL_VALIDATION, NPZ_EXPORT

POST_TRAINING = (FINAL_VALIDATION, NPZ_EXPORT)
EPOCH_LINE = re.compile(r": Epoch (\d+)$", re.M)


TRAIN_JOB_LOG = re.compile(r"train_(?P<configuration>.+)_fold(?P<fold>[^/]+)\.log$")


def fold_of_job(what: str) -> str | None:
    """``__<configuration>/fold_<k>``, the end of the fold folder of a train job's key (its log:
    ``train:work/logs/D/train_2d_fold0.log``); None for any other job."""
    match = TRAIN_JOB_LOG.search(what)
    if match is None:
        return None
    return f"__{match['configuration']}/fold_{match['fold']}"


def repeated_epochs(rundir: Path, only: str | None = None) -> list[str]:
    """One line per fold folder under ``rundir`` (with ``only``, the one whose path ends so: the
    fold the moment aimed at; another fold training beside it may repeat the epoch it was in)
    and epoch that its logs start more than once."""
    found = []
    for fold in sorted(p for p in rundir.rglob("fold_*") if p.is_dir()):
        if only is not None and not fold.as_posix().endswith(only):
            continue
        counts = Counter(
            int(epoch)
            for log in sorted(fold.glob("training_log_*.txt"))
            for epoch in EPOCH_LINE.findall(log.read_text(errors="replace"))
        )
        for epoch, times in sorted(counts.items()):
            if times > 1:
                found.append(f"{fold.relative_to(rundir)}: epoch {epoch} trained {times} times")
    return found
