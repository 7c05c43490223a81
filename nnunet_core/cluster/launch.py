"""How a fold job starts its trainer: one process, ``-num_gpus N`` on one node, or torchrun on M.

The workflow's train rule takes its command prefix and its SLURM resources from here, so that the
text of the generated commands is tested in one place (tests/unit/cluster/test_launch.py).

Multi-node (``training.nodes: M`` > 1), under the SLURM executor plugin:

* resources ``nodes=M, tasks=M, mpi="srun"`` and ``gres="gpu:N"`` become
  ``sbatch --nodes=M --ntasks=M --gres=gpu:N``: one task per node, N GPUs on *each* node
  (``--gpus=N`` would be N for the whole job). ``mpi`` tells the plugin not to wrap the rule
  in an ``srun`` of its own: the rule runs once, in the batch step on the first node, and
  starts the nodes itself.
* the command is ``srun`` with one task per node, each running torchrun (through
  ``stop_relay``, so that SIGUSR1 reaches the trainers, and as
  ``nnunet_core.training.torchrun_launch``, so that a stopped fold's exit status
  ``EXIT_STOPPED`` reaches the workflow instead of torchrun's 1); the c10d rendezvous is hosted
  on the
  first node, the one running the rule, at a port derived from the job id so that two jobs
  sharing a first node do not collide.
"""

from __future__ import annotations

import shlex

RDZV_BASE_PORT = 29500
# Evaluated by the rule's shell on the first node of the allocation.
DEFAULT_RDZV_ENDPOINT = f'"$(hostname):$(({RDZV_BASE_PORT} + ${{SLURM_JOB_ID:-0}} % 1000))"'


def single_node_command(gpus: int) -> str:
    """``nnunet-core train``; with several GPUs it starts one DDP process per GPU itself."""
    return "nnunet-core train" + (f" -num_gpus {gpus}" if gpus > 1 else "")


def multi_node_command(
    nodes: int,
    gpus_per_node: int,
    cpus_per_node: int,
    rdzv_id: str,
    rdzv_endpoint: str | None = None,
) -> str:
    """``srun`` one torchrun agent per node; the trainer's arguments follow this prefix.

    A configured ``rdzv_endpoint`` and the ``rdzv_id`` are shell-quoted (one word each, never
    run); only the default endpoint is left for the shell to evaluate."""
    endpoint = DEFAULT_RDZV_ENDPOINT if not rdzv_endpoint else shlex.quote(rdzv_endpoint)
    return (
        f"srun --nodes {nodes} --ntasks-per-node 1 --cpus-per-task {cpus_per_node} "
        "--kill-on-bad-exit=1 python -m nnunet_core.cluster.stop_relay "
        f"python -m nnunet_core.training.torchrun_launch --nnodes {nodes} "
        f"--nproc_per_node {max(gpus_per_node, 1)} "
        f"--rdzv_backend c10d --rdzv_endpoint {endpoint} --rdzv_id {shlex.quote(rdzv_id)} "
        "-m nnunet_core.train"
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


def cpus_per_node(gpus_per_node: int, cpus_per_gpu: int | None, threads: int) -> int:
    """CPUs of each node's task: what sbatch asked for (``--cpus-per-gpu`` x GPUs, else threads)."""
    if cpus_per_gpu and cpus_per_gpu > 0 and gpus_per_node > 0:
        return cpus_per_gpu * gpus_per_node
    return max(threads, 1)


def job_resources(nodes: int, gpus_per_node: int) -> dict[str, int | str]:
    """Resources of the train rule that shape the SLURM job (see the module docstring)."""
    if nodes <= 1:
        return {"gpu": gpus_per_node}
    resources: dict[str, int | str] = {"gpu": 0, "nodes": nodes, "tasks": nodes, "mpi": "srun"}
    if gpus_per_node > 0:
        # tasks_per_gpu 0: without it the plugin would turn `tasks` into --ntasks-per-gpu
        resources.update(gres=f"gpu:{gpus_per_node}", tasks_per_gpu=0)
    return resources
