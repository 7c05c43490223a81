"""A user's stop of a local run reads as a stop: every job ends within seconds, the console says
what stopped and that the same command continues.

What Snakemake 9 does by itself, locally: each job's shell is a child of the main process, in its
process group. Ctrl-C reaches every process of that group: the jobs die at once and each reads as
a crash (``Error in rule``, the job's log, ``WorkflowError``). SIGINT to Snakemake alone (a login
node's ``kill -INT``) raises KeyboardInterrupt in its scheduler, whose cancel waits for the
running jobs to end by themselves; SIGTERM asks the scheduler to "exit after finishing currently
running jobs". A fold job then trains on for hours.

So the main process (``install``, from the Snakefile; the run's ``onstart`` arms it once the
scheduler exists, whose own SIGTERM handler it replaces) takes SIGINT and SIGTERM as the user's
stop. A thread (signal handlers must not block) then:

1. tells the scheduler to start nothing new and retry nothing (its own graceful exit), and
   quiets Snakemake's console, whose error blocks a stop would otherwise print;
2. sends SIGINT to every process below Snakemake (as Ctrl-C does): a fold's trainer, told by
   ``NNUNET_USER_STOP`` that it is supervised (``nnunet_core.cluster.user_stop``), stops after
   its current epoch with ``checkpoint_latest`` and exits 130; any other job exits;
3. ``GRACE_S`` after the stop sends SIGTERM to whatever still runs (a fold in the middle of a
   long epoch continues from its last checkpoint), ``KILL_S`` after the stop SIGKILL.

Snakemake then cleans up as after any failed job (incomplete markers, its lock), and the run's
``onerror`` prints one line per stop (``stopped by the user (SIGINT): 3d_fullres fold 0 at epoch
3, ...; the same command continues from there``) and exits 130 instead of Snakemake's error.
A second Ctrl-C skips the wait for the epoch. Runs on a cluster executor are left to Snakemake,
which cancels its cluster jobs itself.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nnunet_core.cluster import user_stop as job_side
from nnunet_core.cluster.exit_codes import EXIT_INTERRUPTED
from nnunet_core.layout.results import fold_of_folder, is_fold_folder_name
from nnunet_core.workflow.process_tree import Tracked, signal_name

GRACE_S = 10.0  # a fold whose epoch ends within this stops there, with a checkpoint
KILL_S = 12.5  # then SIGTERM; SIGKILL here: the jobs are gone before 15 s
POLL_S = 0.1
TRAIN_RULE = "train"


class UserStop:
    """One run's stop: the signal that asked for it, the jobs then running, and the thread that
    ends their processes."""

    def __init__(self, workflow: Any, root: int | None = None) -> None:
        self.workflow = workflow
        self.tracked = Tracked(os.getpid() if root is None else root)
        self.signal: int | None = None
        self.jobs: list[Any] = []
        self.asked = threading.Event()
        self.hurry = threading.Event()
        self.finished = threading.Event()
        self.thread = threading.Thread(target=self._run, name="user-stop", daemon=True)

    # ------------------------------------------------------------------ the main thread's part
    def arm(self) -> None:
        """Take SIGINT and SIGTERM from now on; jobs started from now on are supervised."""
        os.environ[job_side.ENV_VAR] = "1"
        self.thread.start()
        signal.signal(signal.SIGINT, self.handle)
        signal.signal(signal.SIGTERM, self.handle)

    def handle(self, signum: int, _frame: Any) -> None:
        """The signal handler: no locks, no I/O; the thread does the work."""
        if self.signal is None:
            self.signal = signum
            self.asked.set()
        else:
            self.hurry.set()

    # ------------------------------------------------------------------ the thread's part
    def _run(self) -> None:
        self.asked.wait()
        start = time.monotonic()
        quiet_console()
        self.jobs = running_jobs(self.workflow)
        scheduler = getattr(self.workflow, "scheduler", None)
        if scheduler is not None:
            scheduler.exit_gracefully()  # nothing new starts, nothing is retried
        try:
            self.end_processes(start)
        finally:
            self.finished.set()

    def end_processes(self, start: float) -> None:
        """SIGINT to every process below Snakemake, SIGTERM after ``GRACE_S`` (or a second
        signal), SIGKILL after ``KILL_S``; returns once none of them runs."""
        while True:
            self.tracked.refresh()
            elapsed = time.monotonic() - start
            self.tracked.signal_all(signal.SIGINT)
            if elapsed >= GRACE_S or self.hurry.is_set():
                self.tracked.signal_all(signal.SIGTERM)
            if elapsed >= KILL_S:
                self.tracked.signal_all(signal.SIGKILL)
            if not self.tracked.living():
                return
            time.sleep(POLL_S)

    # ------------------------------------------------------------------ the console
    def summary(self) -> str:
        """The run's last line: what the stop ended and that the same command continues."""
        name = signal_name(self.signal or signal.SIGINT)
        stopped = [describe_job(job) for job in self.jobs]
        what = ", ".join(stopped) if stopped else "no job was running"
        return f"stopped by the user ({name}): {what}; the same command continues from there"


def install(workflow: Any) -> UserStop | None:
    """In the main process of a local run: arm the stop when the run starts (chained to the
    ``onstart`` already registered) and, at its end, print the stop's line instead of
    Snakemake's error (chained to ``onerror``). Call it after every other ``onstart:``."""
    if not workflow.is_main_process:
        return None
    stop = UserStop(workflow)
    previous_start: Callable[..., Any] = getattr(workflow, "_onstart", None) or _nothing
    previous_error: Callable[..., Any] = getattr(workflow, "_onerror", None) or _nothing

    def onstart(log: Any = None) -> None:
        previous_start(log)
        if workflow.local_exec and not workflow.dryrun:
            stop.arm()

    def onerror(log: Any = None) -> None:
        if stop.signal is None:
            previous_error(log)
            return
        stop.finished.wait(timeout=KILL_S + 10)
        print(stop.summary(), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_INTERRUPTED)

    workflow.onstart(onstart)
    workflow.onerror(onerror)
    return stop


def _nothing(log: Any = None) -> None:  # noqa: ARG001 - a hook's signature
    return None


# ---------------------------------------------------------------------- Snakemake's side
class _Stopped(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:  # noqa: ARG002 - every record
        return False


def quiet_console() -> None:
    """Snakemake's console prints nothing more (its log file keeps everything): the failed
    jobs' error blocks, the removed outputs and "Trying to restart job" would read as a crash."""
    from snakemake.logging import logger

    for handler in logger.handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.addFilter(_Stopped())


def running_jobs(workflow: Any) -> list[Any]:
    """The jobs the scheduler is running (none before the scheduler exists)."""
    scheduler = getattr(workflow, "scheduler", None)
    running = getattr(scheduler, "running", None) or ()
    jobs = []
    for job in list(running):
        jobs.extend(job.jobs if getattr(job, "is_group", lambda: False)() else [job])
    return sorted(jobs, key=lambda job: (job.rule.name, sorted(dict(job.wildcards).items())))


def describe_job(job: Any) -> str:
    """``3d_fullres fold 0 at epoch 3`` for a fold (the epoch its rerun continues with),
    ``RULE`` (with its wildcards) for any other job."""
    rule = job.rule.name
    wildcards = dict(job.wildcards)
    if rule == TRAIN_RULE or rule.endswith(f"_{TRAIN_RULE}"):
        prefix = rule[: -len(TRAIN_RULE)].rstrip("_")
        fold = f"{wildcards.get('configuration', '')} fold {wildcards.get('fold', '')}".strip()
        epoch = continue_epoch(fold_folder(job.output, str(wildcards.get("fold", ""))))
        where = "before its first checkpoint" if epoch is None else f"at epoch {epoch}"
        return " ".join(part for part in (prefix, fold, where) if part)
    if not wildcards:
        return rule
    return f"{rule} ({', '.join(f'{k}={v}' for k, v in wildcards.items())})"


def fold_folder(outputs: Any, fold: str) -> Path | None:
    """The ``fold_<fold>`` folder above one of a fold job's outputs."""
    for output in outputs:
        for folder in Path(str(output)).parents:
            if is_fold_folder_name(folder.name) and fold_of_folder(folder) == fold:
                return folder
    return None


def continue_epoch(folder: Path | None) -> int | None:
    """The epoch ``--c`` continues the fold with (its resume checkpoint's), None if none."""
    if folder is None:
        return None
    import torch  # only after a stop, once its processes are gone

    from nnunet_core.model.checkpoint import find_resume_checkpoint

    path = find_resume_checkpoint(folder)
    if path is None:
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return int(state["current_epoch"])
    except Exception:  # noqa: BLE001 - a summary line must not fail the stop
        return None
