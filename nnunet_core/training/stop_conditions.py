"""When a training stops before its walltime: the signal flag, the deadline, and the check of both.

The trainer asks ``StopConditions(epoch)`` at the end of every epoch; it answers True when the
stop signal (``nnunet_core.cluster.stop_signal``, SIGUSR1 by default) has set the flag, or when the
next
epoch (estimated from the longest epoch of this attempt) plus ``margin`` would end after the
deadline. Under DDP the answer is all-reduced with MAX, so a signal that reached one rank stops
every rank after the same epoch.

The deadline comes from ``--deadline`` (seconds from now, a clock time ``HH:MM[:SS]`` or an ISO
date-time), else from the batch job's end time: SLURM's (``$SLURM_JOB_END_TIME``, else ``squeue``,
else ``scontrol show job``) or LSF's (``bjobs -o ... -json $LSB_JOBID``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

from nnunet_core.cluster import stop_signal
from nnunet_core.errors import ConfigurationError


# ------------------------------------------------------------------------------ deadlines
def parse_deadline(text: str, now: float | None = None) -> float:
    """``--deadline``: seconds from now (``3600``, ``5400.5``), ``HH:MM[:SS]`` (the next such
    local time) or an ISO date-time; returns a Unix time."""
    now = time.time() if now is None else now
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds <= 0:
            msg = f"--deadline {text}: seconds must be > 0"
            raise ConfigurationError(msg)
        return now + seconds
    for layout in ("%H:%M", "%H:%M:%S"):
        try:
            clock = dt.datetime.strptime(value, layout).time()
        except ValueError:
            continue
        today = dt.datetime.fromtimestamp(now)
        moment = dt.datetime.combine(today.date(), clock)
        if moment.timestamp() <= now:
            moment += dt.timedelta(days=1)
        return moment.timestamp()
    try:
        return dt.datetime.fromisoformat(value).timestamp()  # naive: local time, as SLURM
    except ValueError:
        msg = f"--deadline {text!r}: expected seconds, HH:MM[:SS] or an ISO date-time"
        raise ConfigurationError(msg) from None


def _slurm_time(text: str) -> float | None:
    value = text.strip()
    if not value or value.upper() in {"UNKNOWN", "NONE", "N/A", "INVALID"}:
        return None
    try:
        return float(value) if value.isdigit() else dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def _command_output(command: list[str], run: Callable[..., Any]) -> str | None:
    if shutil.which(command[0]) is None and run is subprocess.run:
        return None
    try:
        result = run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


def slurm_end_time(
    env: Mapping[str, str] | None = None, run: Callable[..., Any] = subprocess.run
) -> float | None:
    """The end time of the SLURM job this process runs in (Unix time), or None outside SLURM
    or without a time limit."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    if env.get("SLURM_JOB_END_TIME"):
        return _slurm_time(env["SLURM_JOB_END_TIME"])
    output = _command_output(["squeue", "-h", "-j", job, "-o", "%e"], run)
    if output and output.strip():
        return _slurm_time(output.strip().splitlines()[0])
    output = _command_output(["scontrol", "show", "job", job], run)
    for field in (output or "").split():
        if field.startswith("EndTime="):
            return _slurm_time(field.partition("=")[2])
    return None


# LSF prints the time left and the start time to the minute: both are read and the earlier end
# wins, so the deadline is at most a minute early (stop_margin covers that), never late.
LSF_FIELDS = "time_left start_time runtimelimit"
_LSF_CLOCK = re.compile(r"^(\d+):(\d{2})(?::(\d{2}))?$")  # h:mm, or hh:mm:ss under -hms
_LSF_STAMPS = ("%b %d %H:%M", "%b %d %H:%M:%S", "%b %d %H:%M %Y", "%b %d %H:%M:%S %Y")


def _lsf_duration(text: str) -> float | None:
    """Seconds of ``h:mm``/``hh:mm:ss``, or of minutes (``1440.0``, ``1440.0/host``)."""
    value = text.strip().partition("/")[0].strip()
    clock = _LSF_CLOCK.match(value)
    if clock:
        hours, minutes, seconds = (int(part or 0) for part in clock.groups())
        return hours * 3600.0 + minutes * 60.0 + seconds
    try:
        return float(value) * 60.0
    except ValueError:
        return None  # "-" (no run limit), "" or anything else


def _lsf_time_left(text: str) -> float | None:
    """``time_left`` counts to the run limit only with the status ``L`` (``E``/``X``: to an
    estimated run time, which LSF does not enforce)."""
    value, _, status = text.strip().rpartition(" ")
    return _lsf_duration(value) if status == "L" else None


def _lsf_stamp(text: str, now: float) -> float | None:
    """A bjobs time stamp (``Mar  4 01:00``, year only with LSB_DISPLAY_YEAR) as Unix time; a
    stamp without a year is the latest such moment not after now."""
    value = " ".join(text.split())
    year = dt.datetime.fromtimestamp(now).year
    for layout in _LSF_STAMPS:
        # a year is always parsed (strptime's default 1900 has no Feb 29)
        guesses = [value] if "%Y" in layout else [f"{value} {year}", f"{value} {year - 1}"]
        for guess in guesses:
            try:
                moment = dt.datetime.strptime(guess, layout.removesuffix(" %Y") + " %Y")
            except ValueError:
                continue
            if moment.timestamp() <= now or guess is guesses[-1]:
                return moment.timestamp()
    return None


def lsf_end_time_from_bjobs(output: str, now: float) -> float | None:
    """The job end from ``bjobs -o LSF_FIELDS -json``: the earlier of now + time left and start +
    run limit; None without a run limit or for output that is not one job's record."""
    try:
        record = json.loads(output)["RECORDS"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    ends = []
    left = _lsf_time_left(str(record.get("TIME_LEFT", "")))
    if left is not None:
        ends.append(now + left)
    start = _lsf_stamp(str(record.get("START_TIME", "")), now)
    limit = _lsf_duration(str(record.get("RUNTIMELIMIT", "")))
    if start is not None and limit is not None:
        ends.append(start + limit)
    return min(ends) if ends else None


def lsf_end_time(
    env: Mapping[str, str] | None = None,
    run: Callable[..., Any] = subprocess.run,
    now: float | None = None,
) -> float | None:
    """The end time of the LSF job this process runs in (Unix time), or None outside LSF or
    without a run limit. LSF exports no end time, so ``bjobs`` is asked (``-json``: no columns
    to split on blanks)."""
    env = os.environ if env is None else env
    job = env.get("LSB_JOBID")
    if not job:
        return None
    index = env.get("LSB_JOBINDEX", "0")
    if index not in ("", "0"):
        job = f"{job}[{index}]"  # an element of a job array
    output = _command_output(["bjobs", "-o", LSF_FIELDS, "-json", job], run)
    return lsf_end_time_from_bjobs(output or "", time.time() if now is None else now)


def job_end_time(
    env: Mapping[str, str] | None = None, run: Callable[..., Any] = subprocess.run
) -> float | None:
    """The end time of the batch job this process runs in: SLURM's, else LSF's, else None."""
    env = os.environ if env is None else env
    if env.get("SLURM_JOB_ID"):
        return slurm_end_time(env, run)
    return lsf_end_time(env, run)


# ------------------------------------------------------------------------------ DDP
def reduce_flag(flag: bool) -> bool:
    """MAX over the ranks when ``torch.distributed`` is initialised, else ``flag`` itself."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


# ------------------------------------------------------------------------------ the check
class StopConditions:
    """``should_stop(epoch)`` for ``Trainer.fit``: the signal flag or the deadline (or both).

    ``reason`` says why after a True answer ("SIGUSR1", "deadline", or "SIGUSR1/deadline on
    another rank"). ``clock`` and ``reduce`` are replaceable for tests.
    """

    def __init__(
        self,
        deadline: float | None = None,
        margin: float = 0.0,
        *,
        clock: Callable[[], float] = time.time,
        reduce: Callable[[bool], bool] = reduce_flag,
        signal_flag: Callable[[], bool] = stop_signal.stop_requested,
    ) -> None:
        self.deadline = deadline
        self.margin = float(margin)
        self.clock = clock
        self.reduce = reduce
        self.signal_flag = signal_flag
        self.reason: str | None = None
        self.epoch_seconds: list[float] = []
        self._last = clock()

    def start(self) -> None:
        """Mark the start of the first epoch (call right before training)."""
        self._last = self.clock()

    def estimated_epoch_seconds(self) -> float:
        return max(self.epoch_seconds) if self.epoch_seconds else 0.0

    def deadline_reached(self, now: float) -> bool:
        if self.deadline is None:
            return False
        return now + self.estimated_epoch_seconds() + self.margin > self.deadline

    def __call__(self, epoch: int) -> bool:  # noqa: ARG002 - Trainer's StopCheck signature
        now = self.clock()
        self.epoch_seconds.append(now - self._last)
        self._last = now
        signalled = self.signal_flag()
        late = self.deadline_reached(now)
        local = signalled or late
        stop = self.reduce(local)
        if stop:
            if signalled:
                self.reason = stop_signal.label()
            elif late:
                self.reason = "deadline"
            else:
                self.reason = f"{stop_signal.label()}/deadline on another rank"
        return stop

    def describe(self) -> str:
        """One line for the log at the start: what can stop this training."""
        parts = []
        if stop_signal.signal_number() is not None:
            parts.append(f"{stop_signal.label()} (stops at the next epoch boundary)")
        if self.deadline is not None:
            when = dt.datetime.fromtimestamp(self.deadline).isoformat(timespec="seconds")
            parts.append(f"deadline {when} (margin {self.margin:g} s)")
        return "stop conditions: " + (", ".join(parts) if parts else "none")
