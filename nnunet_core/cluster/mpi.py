"""A process started by an MPI launcher (Open MPI, MVAPICH2, MPICH/MVAPICH hydra).

MPI launchers are how LSF sites (``jsrun``, ``mpirun``) and some SLURM sites start one process
per GPU; their rank variables are the last source of a rank's place on its node, after
torchrun's and SLURM's (``environment.local_from_env``). An MPI launcher is not a sign of DDP by
itself (only torchrun's variables are) and ``detect`` never picks it: the job's end time is the
scheduler's. Each answer is the first variable set among the launchers, in the order below.
"""

from __future__ import annotations

from typing import ClassVar

from nnunet_core.cluster.job_environment import JobEnvironment, first_int_variable

# Open MPI, MVAPICH2, then MPICH/MVAPICH hydra
GLOBAL_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "PMI_RANK")
WORLD_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "PMI_SIZE")
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")
LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


class MpiEnvironment(JobEnvironment):
    """Active when any launcher's rank variable holds a number; no job id, no end time."""

    name: ClassVar[str] = "mpi"

    def is_active(self) -> bool:
        return self.global_rank() is not None or self.local_rank() is not None

    def global_rank(self) -> int | None:
        return first_int_variable(self.environ, GLOBAL_RANK_VARS)

    def local_rank(self) -> int | None:
        return first_int_variable(self.environ, LOCAL_RANK_VARS)

    def world_size(self) -> int | None:
        return first_int_variable(self.environ, WORLD_SIZE_VARS)

    def local_world_size(self) -> int | None:
        return first_int_variable(self.environ, LOCAL_SIZE_VARS)
