"""A rerun keeps each earlier attempt's job log: ``train_3d_fullres_fold0.log.1``, ``.2``, ...

Snakemake deletes a job's ``log:`` files before every attempt (``Job.remove_existing_output``,
also before a retry within the same run), so the lines of the attempt that failed or was stopped
were gone. ``install`` (from the Snakefile, in every process that parses the workflow) makes that
step move each non-empty log aside first, to the next free ``<log>.<n>``: ``.1`` is the first
attempt, the highest number the one before the current. The current attempt's log keeps its name
and holds that attempt alone, which is what ``nnunet-core status`` reads.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_PATCHED = "_nnunet_keeps_logs"


def earlier_attempts(log: str | os.PathLike) -> list[Path]:
    """The kept logs of earlier attempts of ``log``, oldest first."""
    log = Path(log)
    pattern = re.compile(re.escape(log.name) + r"\.(\d+)$")
    found = []
    if log.parent.is_dir():
        for path in log.parent.iterdir():
            match = pattern.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]


def keep_aside(log: str | os.PathLike) -> Path | None:
    """Move a non-empty ``log`` to ``<log>.<n>`` (n: one more than the highest kept); an empty
    one is removed. Returns where it went (None: nothing to keep)."""
    log = Path(log)
    if not log.is_file() or log.is_symlink():
        return None
    if log.stat().st_size == 0:
        log.unlink()
        return None
    kept = earlier_attempts(log)
    number = int(kept[-1].name.rsplit(".", 1)[1]) + 1 if kept else 1
    target = log.with_name(f"{log.name}.{number}")
    while True:
        try:  # link + unlink: never replaces a file another process just kept there
            os.link(log, target)
        except FileExistsError:
            number += 1
            target = log.with_name(f"{log.name}.{number}")
            continue
        except OSError:  # a file system without hard links
            if target.exists():
                number += 1
                target = log.with_name(f"{log.name}.{number}")
                continue
            log.rename(target)
            return target
        log.unlink()
        return target


def keep_logs(logs: Iterable[Any]) -> list[Path]:
    """``keep_aside`` for each of a job's log files; a log that cannot be moved stays for
    Snakemake to delete, as before."""
    kept = []
    for log in logs:
        try:
            target = keep_aside(str(log))
        except OSError:
            continue
        if target is not None:
            kept.append(target)
    return kept


def install() -> bool:
    """Make Snakemake keep earlier attempts' logs (once per process). False if its job class no
    longer has the step this relies on (a Snakemake upgrade: tests/unit say so)."""
    from snakemake.jobs import Job

    original = getattr(Job, "remove_existing_output", None)
    if original is None:
        return False
    if getattr(original, _PATCHED, False):
        return True

    @functools.wraps(original)
    async def remove_existing_output(self: Any) -> None:
        keep_logs(self.log)
        await original(self)

    setattr(remove_existing_output, _PATCHED, True)
    Job.remove_existing_output = remove_existing_output
    return True
