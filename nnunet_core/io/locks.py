"""File locks that can never go stale: an ``flock`` held by an open file.

The kernel drops the lock when its file is closed, which happens when the holding process ends
in any way (SIGKILL included): a crashed holder never blocks the next one, no lock file has to be
cleaned up by hand. The fold lock (``training.fold_lock``), the work_dir lock
(``workflow.work_lock``) and the GPU slots (``cluster.gpu_slots``) all take their locks here.

A holder may write who it is into the file (``write_holder``) so that a process refused the lock
can name it (``read_holder``). On Windows only exclusive, non-blocking locks exist
(``msvcrt.locking``); that is all the fold lock needs there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def open_lock_file(path: str | os.PathLike, *, mode: int | None = None) -> IO[str]:
    """Open (create if needed, with its folder) the lock file ``path``; the lock lives as long as
    the returned file stays open. ``mode``: permissions to set, e.g. 0o666 for a file other
    users' processes lock too (a chmod that fails, on someone else's file, is ignored)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")  # noqa: SIM115 - held open for the lock's lifetime
    if mode is not None:
        try:
            os.chmod(path, mode)
        except OSError:
            pass
    return handle


def try_lock(handle: IO[str], *, shared: bool = False) -> bool:
    """Lock ``handle`` without waiting; False when another open file holds a conflicting lock.

    Any other failure (a file system without locks: ENOLCK) is raised as the ``OSError``."""
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def wait_for_lock(handle: IO[str], *, shared: bool = False) -> None:
    """Lock ``handle``, waiting for as long as another process holds a conflicting lock."""
    import fcntl

    fcntl.flock(handle.fileno(), fcntl.LOCK_SH if shared else fcntl.LOCK_EX)


@contextmanager
def held(path: str | os.PathLike, *, mode: int | None = None) -> Iterator[IO[str]]:
    """``with held(path):`` waits for the exclusive lock of ``path`` and holds it in the block."""
    with open_lock_file(path, mode=mode) as handle:
        wait_for_lock(handle)
        yield handle


def read_holder(handle: IO[str]) -> str:
    """What the holder wrote into the lock file ("" when nothing)."""
    handle.seek(0)
    return handle.read().strip()


def write_holder(handle: IO[str], text: str) -> None:
    """Replace the lock file's content with ``text`` (one line: who holds it)."""
    handle.seek(0)
    handle.truncate()
    handle.write(f"{text}\n")
    handle.flush()
