"""File locks that can never go stale: an ``flock`` held by an open file.

The kernel drops the lock when its file is closed, which happens when the holding process ends
in any way (SIGKILL included): a crashed holder never blocks the next one, no lock file has to be
cleaned up by hand. The fold lock (``training.fold.lock``), the work_dir lock
(``workflow.work_lock``) and the GPU slots (``cluster.gpu_slots``) all take their locks here.

A holder may write who it is into the file (``write_holder``) so that a process refused the lock
can name it (``read_holder``). On Windows only exclusive, non-blocking locks exist
(``msvcrt.locking``); that is all the fold lock needs there.

Lock files are private: created 0600, opened with ``O_NOFOLLOW`` (a symbolic link at a lock path
is refused, so a planted ``gpu_0.lock -> ~/notes.txt`` is never opened, let alone written), never
chmod-ed, and written only when they are regular files of ours with one link: a file someone else
put there is refused in one line, never truncated. ``private_folder`` gives the same guarantee to
a folder of lock files (the GPU slots' folder): a real folder of ours that nobody else can write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from nnunet_core.errors import NnunetCoreError

FILE_MODE = 0o600  # the holder line is read by our own processes only
FOLDER_MODE = 0o700
_OPEN_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO planted at the path must not hang the open
)
_HOLDER_LIMIT = 4096  # characters of a holder line ever read


class UnsafeLockError(NnunetCoreError):
    """A lock file or lock folder is a link, not ours, or open to others: refused, untouched."""

    exit_code = 2


def _my_uid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISREG: "a regular file",
        stat.S_ISDIR: "a folder",
        stat.S_ISLNK: "a symbolic link",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a device",
        stat.S_ISBLK: "a device",
    }
    return next((name for test, name in kinds.items() if test(mode)), "an unknown kind of file")


def file_problem(status: os.stat_result) -> str | None:
    """Why a lock file with this ``lstat``/``fstat`` must not be written; None when it may."""
    if not stat.S_ISREG(status.st_mode):
        return f"is {_kind(status.st_mode)}, not a regular file"
    uid = _my_uid()
    if uid is not None and status.st_uid != uid:
        return f"belongs to uid {status.st_uid}, not to you (uid {uid})"
    if status.st_nlink > 1:
        return f"has {status.st_nlink} hard links (another name could point at it)"
    return None


def _refuse_file(path: Path, problem: str) -> UnsafeLockError:
    return UnsafeLockError(
        f"lock file {path} {problem}: refused and left untouched (a lock file is never followed "
        "through a link, nor written unless it is a plain file of yours); remove it or use "
        "another folder, then run again"
    )


def open_lock_file(path: str | os.PathLike) -> IO[str]:
    """Open (create if needed, 0600, with its folder) the lock file ``path``; the lock lives as
    long as the returned file stays open. A symbolic link, a non-regular file or a file of
    someone else at ``path`` is refused (``UnsafeLockError``) and left as it is."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        before = os.lstat(path)
        problem = "is a symbolic link" if stat.S_ISLNK(before.st_mode) else file_problem(before)
        if problem is not None:  # refused before opening: no device or FIFO is ever opened
            raise _refuse_file(path, problem)
    try:
        fd = os.open(path, _OPEN_FLAGS, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():  # a link planted since the lstat
            raise _refuse_file(path, "is a symbolic link") from None
        raise
    try:
        problem = file_problem(os.fstat(fd))
        if problem is not None:
            raise _refuse_file(path, problem)
        if _OPEN_FLAGS & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        # the checked descriptor, under the path's name (for messages)
        return open(path, "r+", encoding="utf-8", errors="replace", opener=lambda *_: fd)
    except BaseException:
        os.close(fd)
        raise


def private_folder(folder: str | os.PathLike, *, what: str, remedy: str) -> Path:
    """``folder`` made sure to be private: created 0700 when missing; an existing one must be a
    real folder (not a symbolic link), owned by us and not writable by group or others, else one
    line naming it, the problem and ``remedy`` (``UnsafeLockError``). Nothing is chmod-ed."""
    folder = Path(folder)
    if not os.path.lexists(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # a concurrent job made it: checked below
            folder.mkdir(mode=FOLDER_MODE)
    problem = folder_problem(os.lstat(folder))
    if problem is not None:
        msg = f"{what} {folder} {problem}: {remedy}"
        raise UnsafeLockError(msg)
    return folder


def folder_problem(status: os.stat_result) -> str | None:
    """Why a folder with this ``lstat`` may not hold our lock files; None when it may."""
    if not stat.S_ISDIR(status.st_mode):
        return f"is {_kind(status.st_mode)}, not a real folder"
    uid = _my_uid()
    if uid is None:  # Windows: no owner ids or mode bits to check
        return None
    if status.st_uid != uid:
        return f"belongs to uid {status.st_uid}, not to you (uid {uid})"
    open_to = [who for who, bit in (("group", 0o020), ("others", 0o002)) if status.st_mode & bit]
    if open_to:
        mode = stat.S_IMODE(status.st_mode)
        return f"is writable by {' and '.join(open_to)} (mode {mode:o})"
    return None


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
def held(path: str | os.PathLike) -> Iterator[IO[str]]:
    """``with held(path):`` waits for the exclusive lock of ``path`` and holds it in the block."""
    with open_lock_file(path) as handle:
        wait_for_lock(handle)
        yield handle


def read_holder(handle: IO[str]) -> str:
    """What the holder wrote into the lock file ("" when nothing; its first 4096 characters)."""
    handle.seek(0)
    return handle.read(_HOLDER_LIMIT).strip()


def write_holder(handle: IO[str], text: str) -> None:
    """Replace the lock file's content with ``text`` (one line: who holds it). Only a regular
    file of ours with one link is truncated (``open_lock_file`` checked it; checked again)."""
    problem = file_problem(os.fstat(handle.fileno()))
    if problem is not None:
        raise _refuse_file(Path(str(handle.name)), problem)
    handle.seek(0)
    handle.truncate()
    handle.write(f"{text}\n")
    handle.flush()
