"""Everything the package does differently under torchrun: its variables, its command, its exit.

- the process (``TorchrunEnvironment``): torchrun sets ``TORCHELASTIC_RUN_ID`` and, per worker,
  ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``GROUP_RANK`` (the node);
  ``train -num_gpus N`` gives its spawned ranks the same. A launcher decides the number of
  processes, so only a complete sign counts: the run id, or all three of ``RANK``,
  ``WORLD_SIZE`` and ``LOCAL_RANK`` (a stale lone ``RANK`` left in a shell must not make a plain
  run wait for peers that never come). torchrun is no batch scheduler: the job's end time is
  that of the scheduler it runs in (the nodes of a multi-node fold are started by ``srun``
  inside a SLURM job: ``nnunet_core.cluster.slurm``).
- the command (``agent_command``): one agent per node runs ``LAUNCH_MODULE``, torchrun with the
  same arguments, which starts the trainer module on each rank.
- the exit status (``launch``): torchrun turns any worker's non-zero exit into its own exit
  status 1, so the workflow could not tell a stopped fold (to retry with ``--c``) from a crashed
  one. Every rank of a stopped fold exits ``EXIT_STOPPED``; torchrun ends the ranks still
  shutting down once the first has exited, so the first rank to end decides: ``EXIT_STOPPED``
  is passed on, anything else stays torchrun's failure. Its stop signal comes through
  ``stop_relay``, which runs the agent with the signal ignored.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from nnunet_core.cluster.job_environment import (
    Clock,
    CommandRunner,
    JobEnvironment,
    int_variable,
)
from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.errors import ConfigurationError

RUN_ID = "TORCHELASTIC_RUN_ID"
LAUNCHER_TRIPLE = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
RDZV_BASE_PORT = 29500  # torchrun's default rendezvous port
# The entry point each node's agent runs: torchrun after a check of the node's GPUs, which
# needs the trainer's device knowledge (so it lives in training/, above this package).
LAUNCH_MODULE = "nnunet_core.training.torchrun_launch"
TRAINER_MODULE = "nnunet_core.train"  # what the agents start on every rank
GPU_DEVICES = (None, "auto", "cuda")  # the trainer's -device values that put a rank on a GPU


# ------------------------------------------------------------------------------ the process


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


# ------------------------------------------------------------------------------ the command
def rendezvous_id(dataset: str, configuration: str, fold: str) -> str:
    """A multi-node fold's rendezvous id: unique per (dataset, configuration, fold)."""
    return f"{dataset}_{configuration}_{fold}"


def agent_command(nodes: int, nproc_per_node: int, endpoint: str, rdzv_id: str) -> str:
    """A node's torchrun agent for the trainer module (c10d rendezvous); the trainer's arguments
    follow. ``endpoint`` is a shell word already (its builder quotes or leaves it to evaluate);
    ``rdzv_id`` is quoted here."""
    return (
        f"python -m {LAUNCH_MODULE} --nnodes {nodes} "
        f"--nproc_per_node {max(nproc_per_node, 1)} "
        f"--rdzv_backend c10d --rdzv_endpoint {endpoint} --rdzv_id {shlex.quote(rdzv_id)} "
        f"-m {TRAINER_MODULE}"
    )


# ------------------------------------------------------------------- the ranks per node
def device_flag(training_args: Sequence[str]) -> str | None:
    """The trainer's ``-device`` value among its arguments (None when not given)."""
    for i, arg in enumerate(training_args):
        if arg in ("-device", "--device") and i + 1 < len(training_args):
            return training_args[i + 1]
        if arg.startswith(("-device=", "--device=")):
            return arg.split("=", 1)[1]
    return None


def cuda_ranks_per_node(argv: Sequence[str]) -> int | None:
    """``--nproc_per_node`` of torchrun's arguments when they start a fold (our trainer's module)
    whose ranks train on CUDA, else None: any other program is its own business, ``gpu``/
    ``auto`` count the GPUs themselves, and without CUDA the ranks share the CPU."""
    import torch
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(list(argv))
    nproc = str(args.nproc_per_node)
    if not (args.module and args.training_script == TRAINER_MODULE) or not nproc.isdigit():
        return None
    if not torch.cuda.is_available():
        return None
    if device_flag(args.training_script_args) not in GPU_DEVICES:
        return None
    return int(nproc)


# ------------------------------------------------------------------------- the exit status
def launch(argv: Sequence[str], check: Callable[[Sequence[str]], None] | None = None) -> int:
    """torchrun's ``main(argv)`` after ``check(argv)`` (a ``ConfigurationError``: one line and
    its exit code); a stopped fold exits ``EXIT_STOPPED`` instead of torchrun's 1."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    argv = list(argv)
    try:
        if check is not None:
            check(argv)
    except ConfigurationError as exc:
        print(f"torchrun: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    try:
        torchrun_main(argv)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        if failure.exitcode != EXIT_STOPPED:
            raise
        print(
            f"torchrun: rank {rank} stopped cleanly (exit {EXIT_STOPPED}): the retry continues "
            "with --c",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_STOPPED
    return 0
