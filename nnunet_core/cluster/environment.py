"""Which environment this process runs under, and the answers the trainer asks of it.

``detect`` picks one: torchrun first (its variables say a launcher started this process, whatever
scheduler runs the job), else the batch scheduler (SLURM, else LSF), else the local machine. The
questions asked of the environment:

- ``launched_externally``: did a launcher start this process (``train`` then joins its group
  instead of spawning ranks)?
- ``job_end_time``: the walltime deadline the trainer stops before (``--deadline`` overrides it);
- ``local_from_env``: this rank's place on its node, from the first variables that tell it:
  torchrun's, then SLURM's, then an MPI launcher's (each of rank and size on its own), whichever
  environment ``detect`` picked. Without any, the trainer asks the host names of all ranks
  (``process_topology.resolve_topology``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping

from nnunet_core.cluster.job_environment import Clock, CommandRunner, JobEnvironment
from nnunet_core.cluster.local import LocalEnvironment
from nnunet_core.cluster.lsf import LsfEnvironment
from nnunet_core.cluster.mpi import MpiEnvironment
from nnunet_core.cluster.slurm import SlurmEnvironment
from nnunet_core.cluster.torchrun import TorchrunEnvironment

# a SLURM job never carries LSF's variables; SLURM is asked first as it always was
SCHEDULERS: tuple[type[JobEnvironment], ...] = (SlurmEnvironment, LsfEnvironment)
# the sources of a rank's place on its node, first match wins
LOCAL_TOPOLOGY_SOURCES: tuple[type[JobEnvironment], ...] = (
    TorchrunEnvironment,
    SlurmEnvironment,
    MpiEnvironment,
)


def scheduler_of(
    environ: Mapping[str, str] | None = None,
    *,
    run: CommandRunner = subprocess.run,
    clock: Clock = time.time,
) -> JobEnvironment:
    """The batch scheduler this process's job runs under, else ``LocalEnvironment``."""
    for kind in SCHEDULERS:
        candidate = kind(environ, run=run, clock=clock)
        if candidate.is_active():
            return candidate
    return LocalEnvironment(environ, run=run, clock=clock)


def detect(
    environ: Mapping[str, str] | None = None,
    *,
    run: CommandRunner = subprocess.run,
    clock: Clock = time.time,
) -> JobEnvironment:
    """The active environment: torchrun (asking its scheduler for the end time), else
    ``scheduler_of``."""
    scheduler = scheduler_of(environ, run=run, clock=clock)
    launcher = TorchrunEnvironment(environ, scheduler=scheduler, run=run, clock=clock)
    return launcher if launcher.is_active() else scheduler


def launched_externally(environ: Mapping[str, str] | None = None) -> bool:
    """True when torchrun (or a launcher setting its variables) started this process."""
    return isinstance(detect(environ), TorchrunEnvironment)


def job_end_time(
    environ: Mapping[str, str] | None = None, *, run: CommandRunner = subprocess.run
) -> float | None:
    """The end time of the batch job this process runs in (Unix time); None without one."""
    return detect(environ, run=run).end_time()


def local_from_env(environ: Mapping[str, str] | None = None) -> tuple[int | None, int | None]:
    """(local rank, local world size) from ``LOCAL_TOPOLOGY_SOURCES``; None: no variable tells."""
    sources = [kind(environ) for kind in LOCAL_TOPOLOGY_SOURCES]
    rank = next((r for s in sources if (r := s.local_rank()) is not None), None)
    size = next((n for s in sources if (n := s.local_world_size()) is not None), None)
    return rank, size
