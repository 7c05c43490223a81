"""A process inside a SLURM job: its end time and the topology of SLURM's variables.

The end time is ``$SLURM_JOB_END_TIME`` (set by recent SLURM in batch scripts), else what
``squeue`` prints for ``%e``, else ``EndTime=`` of ``scontrol show job``; a job without a time
limit has none (``Unknown``). SLURM gives every task of a step its rank variables
(``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``); ``SLURM_NTASKS_PER_NODE`` is set only
when the job asked for a per-node task count.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar

from nnunet_core.cluster.job_environment import JobEnvironment, command_output, int_variable

_NO_TIME = {"UNKNOWN", "NONE", "N/A", "INVALID"}


def slurm_time(text: str) -> float | None:
    """A SLURM time (Unix seconds or an ISO date-time in local time) as Unix time, else None."""
    value = text.strip()
    if not value or value.upper() in _NO_TIME:
        return None
    try:
        return float(value) if value.isdigit() else dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


class SlurmEnvironment(JobEnvironment):
    """Active when ``$SLURM_JOB_ID`` is set (and not empty)."""

    name: ClassVar[str] = "slurm"

    def is_active(self) -> bool:
        return bool(self.environ.get("SLURM_JOB_ID"))

    def job_id(self) -> str | None:
        return self.environ.get("SLURM_JOB_ID") or None

    def end_time(self) -> float | None:
        job = self.job_id()
        if not job:
            return None
        if self.environ.get("SLURM_JOB_END_TIME"):
            return slurm_time(self.environ["SLURM_JOB_END_TIME"])
        output = command_output(["squeue", "-h", "-j", job, "-o", "%e"], self.run)
        if output and output.strip():
            return slurm_time(output.strip().splitlines()[0])
        output = command_output(["scontrol", "show", "job", job], self.run)
        for field in (output or "").split():
            if field.startswith("EndTime="):
                return slurm_time(field.partition("=")[2])
        return None

    def global_rank(self) -> int | None:
        return int_variable(self.environ, "SLURM_PROCID")

    def local_rank(self) -> int | None:
        return int_variable(self.environ, "SLURM_LOCALID")

    def world_size(self) -> int | None:
        return int_variable(self.environ, "SLURM_NTASKS")

    def local_world_size(self) -> int | None:
        return int_variable(self.environ, "SLURM_NTASKS_PER_NODE")

    def node(self) -> int | None:
        return int_variable(self.environ, "SLURM_NODEID")
