"""One workflow per ``work_dir``: an exclusive lock on ``<work_dir>/logs/.workflow.lock``.

Snakemake locks the folder it runs in (``--directory``, its ``.snakemake/locks``), not the
``work_dir`` of our config: a relative ``work_dir`` lies inside that folder, but an absolute one
(or ``../shared``) is reached from any ``--directory``, and two runs started from two folders
would both write into it. So the main Snakemake process also takes this lock, when the workflow
starts to run jobs (Snakemake's ``onstart`` hook: after the DAG is built, before the first job).
A dry run, ``--lint``, ``--list``, ``--report``, ``--unlock``, a run with nothing to do and the
job processes that parse the Snakefile again (cluster jobs) never take it.

The lock is an ``flock`` held by an open file of that process, so the kernel releases it when
the process ends in any way (SIGKILL included): it is never stale, no ``--unlock`` is needed.
The holder writes its pid, host and Snakemake folder into the file; the second workflow stops
with one line naming them, before any of its jobs runs (the first is not disturbed). The file
is private (``io.locks``): a symbolic link or someone else's file at its path is refused in one
line and left untouched.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import IO, Any

from nnunet_core.errors import NnunetCoreError
from nnunet_core.io.locks import open_lock_file, read_holder, try_lock, write_holder
from nnunet_core.layout.work import work_lock_file

_HELD: dict[Path, IO[str]] = {}  # lock files this process holds (released by the kernel at exit)


class WorkDirLockedError(NnunetCoreError):
    """Another workflow runs on this work_dir."""

    exit_code = 3


def acquire(work_dir: str | os.PathLike) -> Path | None:
    """Take the lock of ``work_dir`` (created if needed); WorkDirLockedError when another process
    holds it, UnsafeLockError when its path holds a link or a file that is not ours. Taking it
    again in the same process is a no-op. None where the file system cannot lock (the run goes
    on, with a warning)."""
    work = Path(work_dir).absolute()
    path = work_lock_file(work)  # with the workflow's logs: no result folder lists it
    if path in _HELD:
        return path
    handle = open_lock_file(path)
    try:
        locked = try_lock(handle)
    except OSError as exc:  # e.g. ENOLCK on a file system without locks
        handle.close()
        print(
            f"warning: cannot lock work_dir {work} ({exc.strerror}); two workflows on it "
            "would not be refused",
            file=sys.stderr,
        )
        return None
    if not locked:
        holder = read_holder(handle) or "an unknown process"
        handle.close()
        msg = (
            f"work_dir {work} is in use by another workflow ({holder}; lock "
            f"{path.relative_to(work)}): wait for it to finish or stop it, or choose another "
            "work_dir"
        )
        raise WorkDirLockedError(msg)
    write_holder(handle, f"pid {os.getpid()} on {socket.gethostname()}, run from {Path.cwd()}")
    _HELD[path] = handle
    return path


def lock_when_started(workflow: Any, work_dir: str | os.PathLike) -> None:
    """In the main Snakemake process: take the ``work_dir`` lock when the run starts (the
    workflow's ``onstart`` hook; a later ``onstart:`` in the Snakefile would replace it).
    ``work_dir`` is resolved now, against the folder Snakemake runs in."""
    if not workflow.is_main_process:
        return
    folder = Path(work_dir).absolute()

    def onstart(log: Any = None) -> None:  # noqa: ARG001 - Snakemake passes its log file
        from snakemake.exceptions import WorkflowError  # printed as its message, no traceback

        try:
            acquire(folder)
        except NnunetCoreError as exc:  # held by another workflow, or an unsafe lock file
            raise WorkflowError(str(exc)) from None

    workflow.onstart(onstart)
