"""When a training stops before its walltime: the signal flag, the deadline, and the check of both.

The trainer asks ``StopConditions(epoch)`` at the end of every epoch; it answers True when the
stop signal (``nnunet_core.cluster.stop_signal``, SIGUSR1 by default) has set the flag, or when
the next epoch (estimated from the longest epoch of this attempt) plus ``margin`` would end after
the deadline. Under DDP the answer is all-reduced with MAX, so a signal that reached one rank
stops every rank after the same epoch.

The deadline comes from ``--deadline`` (seconds from now, a clock time ``HH:MM[:SS]`` or an ISO
date-time, ``parse_deadline``), else from the batch job's end time, which the cluster package
reads from the scheduler (``nnunet_core.cluster.environment.job_end_time``: SLURM's or LSF's).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from nnunet_core.cluster import stop_signal, user_stop
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
            if signalled:  # the user's Ctrl-C in a workflow's job, else the stop signal
                self.reason = user_stop.reason() or stop_signal.label()
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
