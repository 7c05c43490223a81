"""What every scheduler or launcher environment answers, read from its environment variables.

One subclass per scheduler (SLURM, LSF), launcher (torchrun, MPI) and the plain machine (local);
``nnunet_core.cluster.environment.detect`` picks the one this process runs under. Each answers:

- ``is_active()``: whether this process runs under it;
- ``job_id()`` and ``end_time()``: the batch job and its walltime deadline (Unix time), None where
  there is none (a launcher asks the scheduler it runs in);
- the topology its variables tell: ``global_rank``, ``local_rank``, ``world_size``,
  ``local_world_size``, ``node``; None where they tell nothing.

Variables are read whether or not the environment is active, so a partial set still tells what
it tells (the local-rank lookup in ``environment.local_from_env`` relies on that). Schedulers'
commands (``squeue``, ``bjobs``) run only in ``end_time``, through the ``run`` given (tests pass
a fake).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

CommandRunner = Callable[..., Any]  # subprocess.run's signature; tests pass a fake
Clock = Callable[[], float]


def int_variable(environ: Mapping[str, str], name: str) -> int | None:
    """The integer in ``$name``, or None when unset, empty or not a number.

    SLURM writes per-node counts like ``4(x2)`` or ``4,2``; the first node's count is ours only
    when all are equal, which is what a DDP job asks for.
    """
    value = environ.get(name, "").strip()
    if not value:
        return None
    value = value.split("(")[0].split(",")[0]
    try:
        return int(value)
    except ValueError:
        return None


def first_int_variable(environ: Mapping[str, str], names: Sequence[str]) -> int | None:
    """The first of ``names`` that holds an integer (``int_variable``), else None."""
    for name in names:
        value = int_variable(environ, name)
        if value is not None:
            return value
    return None


def command_output(command: list[str], run: CommandRunner) -> str | None:
    """stdout of a scheduler's command, or None when it is missing, fails or hangs (20 s)."""
    if shutil.which(command[0]) is None and run is subprocess.run:
        return None
    try:
        result = run(command, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout if result.returncode == 0 else None


class JobEnvironment:
    """The answers of an environment that sets none of the variables (overridden per scheduler)."""

    name: ClassVar[str] = "unknown"

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        run: CommandRunner = subprocess.run,
        clock: Clock = time.time,
    ) -> None:
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.run = run
        self.clock = clock

    def is_active(self) -> bool:
        return False

    def job_id(self) -> str | None:
        return None

    def end_time(self) -> float | None:
        """When the job's walltime ends (Unix time); None without a time limit."""
        return None

    def global_rank(self) -> int | None:
        return None

    def local_rank(self) -> int | None:
        return None

    def world_size(self) -> int | None:
        return None

    def local_world_size(self) -> int | None:
        return None

    def node(self) -> int | None:
        """The index of this process's node among the job's nodes."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(job {self.job_id() or '-'})"
