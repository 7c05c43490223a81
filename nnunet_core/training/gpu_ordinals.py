"""Which GPU a training rank takes, and whether the GPUs a fold asks for are visible.

CUDA numbers the GPUs that ``CUDA_VISIBLE_DEVICES`` lets through 0..n-1 (a scheduler's
``--gres``, LSF or our slot locks set it). Both answers are needed before anything runs on a GPU:

- a fold that asks for more processes than there are visible GPUs would start its ranks and
  lose rank n inside CUDA ("invalid device ordinal"); ``check_visible`` refuses it in one line
  that names the request, the visible count and ``CUDA_VISIBLE_DEVICES``;
- an NCCL rank uses the current device for its communicator, so a rank that runs a collective
  before ``torch.cuda.set_device`` lands on ``cuda:0`` with every other rank of its node
  (a duplicate-GPU error or a hang). ``rank_ordinal`` gives the ordinal from the environment
  alone, so the device is set before the rank joins its group.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nnunet_core.cluster.environment import local_from_env
from nnunet_core.cluster.job_environment import int_variable
from nnunet_core.errors import ConfigurationError

VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


def visible_note(environ: Mapping[str, str] | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES=<value>``, or that it is unset (all of the machine's GPUs)."""
    env = os.environ if environ is None else environ
    value = env.get(VISIBLE_ENV)
    return f"{VISIBLE_ENV} unset" if value is None else f"{VISIBLE_ENV}={value}"


def visible_gpus() -> int:
    """The GPUs this process may use (torch counts after ``CUDA_VISIBLE_DEVICES``)."""
    import torch

    return int(torch.cuda.device_count())


def check_visible(
    requested: int,
    what: str,
    visible: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Refuse ``what`` (e.g. ``-num_gpus 4``), which needs ``requested`` GPUs, when fewer are
    visible: one ``ConfigurationError`` line (exit 2), before any rank starts."""
    visible = visible_gpus() if visible is None else visible
    if requested > visible:
        msg = (
            f"{what} needs {requested} GPU(s) but {visible} visible ({visible_note(environ)}): "
            f"ask the scheduler for {requested} GPU(s) or use at most {visible}"
        )
        raise ConfigurationError(msg)


def rank_ordinal(environ: Mapping[str, str] | None = None, visible: int | None = None) -> int:
    """This rank's GPU ordinal from the environment, before it joins its process group.

    The launcher's local rank (torchrun's ``LOCAL_RANK``, else SLURM's or an MPI launcher's);
    without one, the global ``RANK`` modulo the local world size where a variable tells it, else
    modulo the visible GPUs (upstream's single-node rule, rank = GPU). A local rank beyond the
    visible GPUs is one line naming both, instead of CUDA's "invalid device ordinal".
    """
    env = os.environ if environ is None else environ
    visible = visible_gpus() if visible is None else visible
    local, local_size = local_from_env(env)
    if local is None:
        rank = int_variable(env, "RANK") or 0
        local = rank % (local_size if local_size else max(visible, 1))
    if local >= visible:
        msg = (
            f"local rank {local} needs GPU {local} but {visible} GPU(s) visible "
            f"({visible_note(env)}): start at most {visible} process(es) per node"
        )
        raise ConfigurationError(msg)
    return local
