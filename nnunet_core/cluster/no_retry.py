"""The marker a cluster attempt leaves when a retry cannot help: ``fold_k/no_retry.json``.

On a cluster every attempt of a fold is a new batch job, and the main Snakemake resubmits a
failed one (``retries:``) without knowing why it failed: that is what a walltime stop (exit 75)
needs. After a failure that a retry cannot help (``exit_codes.is_retryable``: the user's config,
data or trainer code, a full disk) the attempt's retry runner writes this marker into the fold
folder; the next attempt's runner finds it and exits at once with the same status and line,
instead of waiting in the queue for a GPU to fail again. The main process of the next run of the
workflow removes every marker when it starts (``clear_markers``): a user who fixed the code and
reruns gets a fresh try.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.cluster.exit_codes import EXIT_INTERRUPTED, EXIT_OK, describe, is_retryable
from nnunet_core.io.atomic import write_json
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import (
    NO_RETRY_MARKER,
    fold_dirs_in,
    model_dirs_of,
)


@dataclass(frozen=True)
class Marker:
    """A failed attempt's exit status and the line it ended with."""

    exit_status: int
    line: str


def marks(code: int) -> bool:
    """Whether an attempt that exited ``code`` leaves the marker: a failure a retry cannot help,
    but not the user's own stop (130), after which the same command is meant to go on."""
    return code not in (EXIT_OK, EXIT_INTERRUPTED) and not is_retryable(code)


def write_marker(path: str | os.PathLike, code: int, line: str) -> None:
    """Record the failure (atomically; the folder is created if the attempt never got there)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    record = {
        "exit_status": code,
        "reason": describe(code),
        "line": line,
        "host": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json(path, record)


def read_marker(path: str | os.PathLike) -> Marker | None:
    """The recorded failure, or None when there is none (an unreadable marker counts as one:
    exit 1 with a line that names it, rather than a GPU spent on a guess)."""
    file = Path(path)
    if not file.is_file():
        return None
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
        return Marker(int(record["exit_status"]), str(record["line"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Marker(1, f"{file}: unreadable marker of an earlier failed attempt")


def clear_markers(results: Path, trainer: str, plans: str) -> list[Path]:
    """Remove the markers in the fold folders of this trainer and plans; returns the folders."""
    cleared = []
    for model in model_dirs_of(results, trainer, plans):
        for fold in fold_dirs_in(model):
            if remove_file(fold / NO_RETRY_MARKER, inside=[fold]):
                cleared.append(fold)
    return cleared
