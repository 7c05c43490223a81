"""One training per fold folder at a time: an exclusive lock on ``fold_k/.training.lock``.

The lock is an ``flock`` (``msvcrt.locking`` on Windows) held by the open file, so the kernel
releases it when the process ends in any way, a SIGKILL included: a stale lock file never blocks
a retry. A second job that tries to train the same fold fails at once with a clear message
naming the holder (pid and host written into the file by the holder). The file is private
(``io.locks``): a symbolic link or someone else's file at its path is refused in one line and left
untouched.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import IO

from nnunet_core.errors import NnunetCoreError
from nnunet_core.io.locks import open_lock_file, read_holder, try_lock, write_holder
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import FOLD_LOCK_NAME


class FoldLockedError(NnunetCoreError):
    """Another process trains this fold."""

    exit_code = 3


class FoldLock:
    """``with FoldLock(fold_folder):`` trains; entering raises FoldLockedError when held."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / FOLD_LOCK_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        handle = open_lock_file(self.path)
        if not try_lock(handle):
            holder = read_holder(handle) or "unknown process"
            handle.close()
            msg = (
                f"{self.path.parent}: this fold is already being trained by {holder} "
                f"(lock {self.path.name}); wait for it to finish or stop it first"
            )
            raise FoldLockedError(msg)
        write_holder(handle, f"pid {os.getpid()} on {socket.gethostname()}")
        self._handle = handle

    def release(self, remove: bool = False) -> None:
        """Drop the lock; ``remove`` also deletes the file (once the fold is finished)."""
        if self._handle is not None:
            if remove:
                # still held: nobody can take it meanwhile
                remove_file(self.path, inside=[self.path.parent])
            self._handle.close()  # closing the descriptor drops the lock
            self._handle = None

    def __enter__(self) -> FoldLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
