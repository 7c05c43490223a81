"""A plain process on a workstation: no batch job, no deadline, no topology variables.

What ``environment.detect`` answers outside SLURM, LSF and torchrun. Its topology is unknown
rather than "rank 0 of 1": the ranks ``train -num_gpus N`` spawns carry torchrun's variables, and
a process group without any variables finds its local ranks from the host names.
"""

from __future__ import annotations

from typing import ClassVar

from nnunet_core.cluster.job_environment import JobEnvironment


class LocalEnvironment(JobEnvironment):
    """Always active (the last choice of ``detect``); every answer is the base class's None."""

    name: ClassVar[str] = "local"

    def is_active(self) -> bool:
        return True
