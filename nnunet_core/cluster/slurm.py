"""Everything the package does differently under SLURM: the job, its submission, its stop signal.

- the job (``SlurmEnvironment``): ``$SLURM_JOB_ID`` names it; the end time is
  ``$SLURM_JOB_END_TIME`` (set by recent SLURM in batch scripts), else what ``squeue`` prints
  for ``%e``, else ``EndTime=`` of ``scontrol show job``; a job without a time limit has none
  (``Unknown``). SLURM gives every task of a step its rank variables (``SLURM_PROCID``,
  ``SLURM_LOCALID``, ``SLURM_NODEID``); ``SLURM_NTASKS_PER_NODE`` is set only when the job asked
  for a per-node task count.
- a multi-node fold (``training.nodes: M`` > 1), which only SLURM runs, under the SLURM executor
  plugin: resources ``nodes=M, tasks=M, mpi="srun"`` and ``gres="gpu:N"`` become
  ``sbatch --nodes=M --ntasks=M --gres=gpu:N``: one task per node, N GPUs on *each* node
  (``--gpus=N`` would be N for the whole job). ``mpi`` tells the plugin not to wrap the rule in
  an ``srun`` of its own: the rule runs once, in the batch step on the first node, and starts
  the nodes itself, with ``srun`` of one task per node, each running a torchrun agent
  (``nnunet_core.cluster.torchrun.agent_command``) through ``stop_relay``, so that the stop
  signal reaches the trainers. The c10d rendezvous is hosted on the first node, the one running
  the rule, at a port derived from the job id so that two jobs sharing a first node do not
  collide. The text of these commands is tested in tests/unit/cluster/test_slurm_launch.py;
  tests/cluster checks the sbatch lines the plugin builds from them.
- the stop signal: sbatch's ``--signal=SIG@SECONDS`` (``stop_signal_option``; profiles/slurm
  writes it with ``$NNUNET_STOP_SIGNAL``) sends it to every process of the job step.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Mapping
from typing import ClassVar

from nnunet_core.cluster import stop_signal, torchrun
from nnunet_core.cluster.job_environment import JobEnvironment, command_output, int_variable

# ------------------------------------------------------------------------------ the job
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


# ---------------------------------------------------------------------- a multi-node fold
# Evaluated by the rule's shell on the first node of the allocation.
DEFAULT_RDZV_ENDPOINT = (
    f'"$(hostname):$(({torchrun.RDZV_BASE_PORT} + ${{SLURM_JOB_ID:-0}} % 1000))"'
)


def multi_node_command(
    nodes: int,
    gpus_per_node: int,
    cpus_per_node: int,
    rdzv_id: str,
    rdzv_endpoint: str | None = None,
) -> str:
    """``srun`` one relayed torchrun agent per node; the trainer's arguments follow this prefix.

    A configured ``rdzv_endpoint`` is shell-quoted (one word, never run); only the default
    endpoint is left for the shell to evaluate."""
    endpoint = DEFAULT_RDZV_ENDPOINT if not rdzv_endpoint else shlex.quote(rdzv_endpoint)
    return (
        f"srun --nodes {nodes} --ntasks-per-node 1 --cpus-per-task {cpus_per_node} "
        "--kill-on-bad-exit=1 python -m nnunet_core.cluster.stop_relay "
        + torchrun.agent_command(nodes, gpus_per_node, endpoint, rdzv_id)
    )


def multi_node_guard(nodes: int) -> str:
    """A first shell line that fails clearly where there is no SLURM job to spread over."""
    if nodes <= 1:
        return ""
    return (
        'if [ -z "${SLURM_JOB_ID:-}" ]; then echo "train: training.nodes is '
        f'{nodes}: that needs a SLURM job (--profile profiles/slurm), whose nodes srun starts" '
        ">&2; exit 2; fi\n"
    )


def multi_node_refusal(nodes: int) -> str:
    """The config check's line for ``training.nodes`` > 1 in a run whose jobs all run here."""
    return (
        f"config training.nodes: {nodes} needs the SLURM executor (--profile profiles/slurm),"
        " whose jobs span several nodes; this run executes every job on this machine: set "
        "training.nodes: 1 (and training.gpus_per_job for several GPUs here)"
    )


def cpus_per_node(gpus_per_node: int, cpus_per_gpu: int | None, threads: int) -> int:
    """CPUs of each node's task: what sbatch asked for (``--cpus-per-gpu`` x GPUs, else threads)."""
    if cpus_per_gpu and cpus_per_gpu > 0 and gpus_per_node > 0:
        return cpus_per_gpu * gpus_per_node
    return max(threads, 1)


def job_resources(nodes: int, gpus_per_node: int) -> dict[str, int | str]:
    """Resources of the train rule that shape the SLURM job (see the module docstring); one
    node: only the ``gpu`` count, which any executor reads."""
    if nodes <= 1:
        return {"gpu": gpus_per_node}
    resources: dict[str, int | str] = {"gpu": 0, "nodes": nodes, "tasks": nodes, "mpi": "srun"}
    if gpus_per_node > 0:
        # tasks_per_gpu 0: without it the plugin would turn `tasks` into --ntasks-per-gpu
        resources.update(gres=f"gpu:{gpus_per_node}", tasks_per_gpu=0)
    return resources


# ------------------------------------------------------------------------ the stop signal
def stop_signal_option(lead_seconds: int, env: Mapping[str, str] | None = None) -> str:
    """sbatch's option for the warning ``lead_seconds`` before the walltime, to every step."""
    return f"--signal={stop_signal.configured_name(env)}@{int(lead_seconds)}"
