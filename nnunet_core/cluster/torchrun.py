"""A process started by torchrun (or a launcher that sets the same variables).

torchrun sets ``TORCHELASTIC_RUN_ID`` and, per worker, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE`` and ``GROUP_RANK`` (the node); ``train -num_gpus N`` gives its spawned ranks
the same. A launcher decides the number of processes, so only a complete sign counts: the run id,
or all three of ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (a stale lone ``RANK`` left in a
shell must not make a plain run wait for peers that never come).

torchrun is no batch scheduler: the job's end time is that of the scheduler it runs in (the
nodes of a multi-node fold are started by ``srun`` inside a SLURM job).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from typing import ClassVar

from nnunet_core.cluster.job_environment import (
    Clock,
    CommandRunner,
    JobEnvironment,
    int_variable,
)

RUN_ID = "TORCHELASTIC_RUN_ID"
LAUNCHER_TRIPLE = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


class TorchrunEnvironment(JobEnvironment):
    """Active with ``TORCHELASTIC_RUN_ID`` or the whole ``LAUNCHER_TRIPLE`` (set, even empty)."""

    name: ClassVar[str] = "torchrun"

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        scheduler: JobEnvironment | None = None,
        run: CommandRunner = subprocess.run,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(environ, run=run, clock=clock)
        self.scheduler = scheduler

    def is_active(self) -> bool:
        return RUN_ID in self.environ or all(name in self.environ for name in LAUNCHER_TRIPLE)

    def job_id(self) -> str | None:
        """The batch job's id (torchrun's run id names a rendezvous, not a job)."""
        return self.scheduler.job_id() if self.scheduler is not None else None

    def end_time(self) -> float | None:
        return self.scheduler.end_time() if self.scheduler is not None else None

    def global_rank(self) -> int | None:
        return int_variable(self.environ, "RANK")

    def local_rank(self) -> int | None:
        return int_variable(self.environ, "LOCAL_RANK")

    def world_size(self) -> int | None:
        return int_variable(self.environ, "WORLD_SIZE")

    def local_world_size(self) -> int | None:
        return int_variable(self.environ, "LOCAL_WORLD_SIZE")

    def node(self) -> int | None:
        return int_variable(self.environ, "GROUP_RANK")
