"""Which validation cases a retried fold can keep: those exported after its final weights.

A fold whose training finished keeps ``checkpoint_final.pth`` when its final validation fails
or is killed (the workflow declares only the summary as the job's output). The retry continues
from those weights and trains nothing; a case whose every file was written after them (each
file atomically: present means whole) came from those same weights, so only the other cases are
predicted again. A fresh ``checkpoint_final.pth`` is newer than any earlier export, so after a
training that just ended every case is predicted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path


def done_cases(
    cases: Sequence[str],
    weights: Path,
    files_of: Callable[[str], Iterable[Path]],
) -> set[str]:
    """The cases among ``cases`` whose files (``files_of``) all exist and are not older than
    ``weights``; none when ``weights`` does not exist."""
    try:
        since = weights.stat().st_mtime_ns
    except FileNotFoundError:
        return set()
    done = set()
    for case_id in cases:
        try:
            if all(path.stat().st_mtime_ns >= since for path in files_of(case_id)):
                done.add(case_id)
        except FileNotFoundError:
            continue
    return done
