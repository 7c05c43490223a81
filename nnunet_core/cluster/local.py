"""Everything the package does differently on a plain machine: no batch job, one node.

- the process (``LocalEnvironment``): what ``environment.detect`` answers outside SLURM, LSF
  and torchrun: no job, no deadline, no topology variables. Its topology is unknown rather than
  "rank 0 of 1": the ranks ``train -num_gpus N`` spawns carry torchrun's variables, and a
  process group without any variables finds its local ranks from the host names.
- the command (``single_node_command``): a fold on one node (a workstation, or one node of a
  batch job) starts the trainer itself, which spawns one DDP rank per GPU.
- what a scheduler would do otherwise, done here by generic modules: GPUs are shared out by
  ``gpu_slots`` (only where no scheduler set ``CUDA_VISIBLE_DEVICES``), a failed fold is retried
  by ``retry`` in the job itself, and the user's Ctrl-C stops a fold at its next epoch
  (``user_stop``).
"""

from __future__ import annotations

from typing import ClassVar

from nnunet_core.cluster.job_environment import JobEnvironment


class LocalEnvironment(JobEnvironment):
    """Always active (the last choice of ``detect``); every answer is the base class's None."""

    name: ClassVar[str] = "local"

    def is_active(self) -> bool:
        return True


def single_node_command(gpus: int) -> str:
    """``nnunet-core train``; with several GPUs it starts one DDP process per GPU itself."""
    return "nnunet-core train" + (f" -num_gpus {gpus}" if gpus > 1 else "")
