"""One training per fold folder at a time: an exclusive lock on ``fold_k/.training.lock``.

The lock is an ``flock`` (``msvcrt.locking`` on Windows) held by the open file, so the kernel
releases it when the process ends in any way, a SIGKILL included: a stale lock file never blocks
a retry. A second job that tries to train the same fold fails at once with a clear message
naming the holder (pid and host written into the file by the holder).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import IO

from nnunet_core.errors import NnunetCoreError

LOCK_NAME = ".training.lock"


class FoldLockedError(NnunetCoreError):
    """Another process trains this fold."""

    exit_code = 3


def _try_lock(handle: IO[str]) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class FoldLock:
    """``with FoldLock(fold_folder):`` trains; entering raises FoldLockedError when held."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held open for the lock's lifetime
        if not _try_lock(handle):
            handle.seek(0)
            holder = handle.read().strip() or "unknown process"
            handle.close()
            msg = (
                f"{self.path.parent}: this fold is already being trained by {holder} "
                f"(lock {self.path.name}); wait for it to finish or stop it first"
            )
            raise FoldLockedError(msg)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._handle = handle

    def release(self, remove: bool = False) -> None:
        """Drop the lock; ``remove`` also deletes the file (once the fold is finished)."""
        if self._handle is not None:
            if remove:
                self.path.unlink(missing_ok=True)  # still held: nobody can take it meanwhile
            self._handle.close()  # closing the descriptor drops the lock
            self._handle = None

    def __enter__(self) -> FoldLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
