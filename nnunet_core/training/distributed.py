"""Distributed data parallel (DDP) training: how a fold job is launched and what each rank does.

Three launch paths, decided by ``launch_mode`` in this order:

- ``EXTERNAL``: a launcher started this process (``TORCHELASTIC_RUN_ID`` set, or all three of
  ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``). It decides the process count, so ``-num_gpus > 1``
  is an error. The process joins the group with ``env://``.
- ``SPAWN``: ``-num_gpus N > 1`` without a launcher: ``spawn`` starts N workers on this machine
  with the variables torchrun would set (``MASTER_ADDR=localhost``, a free ``MASTER_PORT``).
- ``SINGLE``: one plain process, no process group.

A stale lone ``RANK`` in the shell is not a launcher. Which launcher or scheduler this process
runs under, and the rank's place on its node, are the cluster package's answers
(``nnunet_core.cluster.environment``, ``nnunet_core.cluster.process_topology``). The group uses
nccl on CUDA and gloo on the CPU (so every path runs in CI) and is created with ``device_id``
where torch supports it, so a broken interconnect fails at start instead of at the first
collective. A CUDA rank's GPU is set before it joins (``gpu_ordinals``), on every path.

The global batch of the plans is split over the ranks (``split_batch``); sample seeds are global
batch positions, so the union of the ranks' samples is exactly the single-process batch.
"""

from __future__ import annotations

import inspect
import os
import socket
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from nnunet_core.cluster import stop_signal
from nnunet_core.cluster.environment import launched_externally
from nnunet_core.cluster.process_topology import Topology, resolve_topology
from nnunet_core.errors import ConfigurationError, NnunetCoreError
from nnunet_core.training.data.patch_sampling import OVERSAMPLE_FOREGROUND_PERCENT, forced_mask
from nnunet_core.training.gpu_ordinals import rank_ordinal

EXTERNAL = "external"
SPAWN = "spawn"
SINGLE = "single"
# collectives wait this long (rank 0 alone writes checkpoints, plots and the summary)
DEFAULT_TIMEOUT = timedelta(minutes=60)


def launch_mode(num_gpus: int, environ: Mapping[str, str] | None = None) -> str:
    """``EXTERNAL``, ``SPAWN`` or ``SINGLE`` (see the module docstring)."""
    if num_gpus < 1:
        msg = f"-num_gpus must be >= 1, got {num_gpus}"
        raise ConfigurationError(msg)
    if launched_externally(environ):
        if num_gpus > 1:
            msg = (
                f"-num_gpus {num_gpus} under torchrun/an external launcher: the launcher decides "
                "the number of processes (use --nproc_per_node and drop -num_gpus)"
            )
            raise ConfigurationError(msg)
        return EXTERNAL
    return SPAWN if num_gpus > 1 else SINGLE


def _all_gather_strings(value: str) -> list[str]:
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return [str(v) for v in gathered]


# ---------------------------------------------------------------------------- process group
def rank_device(requested: torch.device, local_rank: int) -> torch.device:
    """``cuda:local_rank`` for CUDA, the requested device otherwise (CPU ranks share it)."""
    if requested.type == "cuda":
        return torch.device("cuda", local_rank)
    return requested


def supports_device_id() -> bool:
    return "device_id" in inspect.signature(dist.init_process_group).parameters


def process_backend(requested: torch.device) -> str:
    """nccl on CUDA, gloo otherwise (so every DDP path runs in CI on the CPU)."""
    return "nccl" if requested.type == "cuda" else "gloo"


@contextmanager
def process_group(
    requested: torch.device, timeout: timedelta = DEFAULT_TIMEOUT
) -> Iterator[tuple[Topology, torch.device]]:
    """Join the ``env://`` group; yields (topology, this rank's device); destroys it at the end.

    On CUDA the device is set before the rank joins, on every launch path: NCCL binds a rank to
    the current device at its first collective (the topology's host-name gather is one), so a
    rank without ``LOCAL_RANK`` takes the ordinal ``gpu_ordinals.rank_ordinal`` derives.
    """
    backend = process_backend(requested)
    kwargs: dict[str, Any] = {"backend": backend, "init_method": "env://", "timeout": timeout}
    device = requested
    if requested.type == "cuda":
        device = rank_device(requested, rank_ordinal())
        torch.cuda.set_device(device)
        if supports_device_id():
            kwargs["device_id"] = device
    dist.init_process_group(**kwargs)
    try:
        topology = resolve_topology(
            dist.get_rank(), dist.get_world_size(), None, _all_gather_strings
        )
        print(f"DDP {topology.describe()}, device {device}, backend {backend}", flush=True)
        yield topology, device
    finally:
        dist.destroy_process_group()


def find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def spawn(num_workers: int, fn: Callable[..., Any], *args: Any) -> int:
    """Run ``fn(*args)`` in ``num_workers`` fresh processes as ranks 0..N-1 of one machine.

    Each worker gets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` (as torchrun
    sets them) and joins the group itself. When one worker fails the others are terminated (they
    would wait in a collective until the timeout). The stop signal sent to this launcher is
    forwarded to the workers (its role in ``nnunet_core.cluster.stop_signal``). A worker that
    exits ``EXIT_STOPPED`` stopped cleanly at the same epoch as the others: they are left to
    finish. Returns the first failure's exit code, else ``EXIT_STOPPED`` if a worker stopped,
    else 0.
    """
    import multiprocessing as mp
    from multiprocessing.connection import wait

    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", str(find_free_port()))
    context = mp.get_context("spawn")
    workers = [
        context.Process(target=_worker, args=(rank, num_workers, fn, args), name=f"rank{rank}")
        for rank in range(num_workers)
    ]
    restore_handler = stop_signal.forward(
        lambda: [w.pid for w in workers if w.pid is not None and w.exitcode is None]
    )
    try:
        for worker in workers:
            worker.start()
        running = list(workers)
        failure, stopped = 0, False
        while running:
            for sentinel in wait([w.sentinel for w in running]):
                done = next(w for w in running if w.sentinel == sentinel)
                done.join()
                running.remove(done)
                if done.exitcode == stop_signal.EXIT_STOPPED:
                    stopped = True
                elif done.exitcode and not failure:
                    failure = done.exitcode if done.exitcode > 0 else 1
                    for other in running:
                        other.terminate()
        return failure or (stop_signal.EXIT_STOPPED if stopped else 0)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
                worker.join(5)
        restore_handler()


def _worker(rank: int, world_size: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world_size),
        GROUP_RANK="0",
    )
    try:
        code = fn(*args)
    except NnunetCoreError as exc:
        print(f"rank {rank}: error: {exc}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    except BaseException:
        traceback.print_exc()
        sys.exit(1)
    sys.exit(int(code or 0))


# ------------------------------------------------------------------------------- the batch
@dataclass(frozen=True)
class RankBatch:
    """This rank's share of the global batch: size, first global position, forced positions."""

    size: int
    offset: int
    forced: tuple[bool, ...]


def batch_sizes(global_batch: int, world_size: int) -> list[int]:
    """``bs // ws`` per rank, one more for the first ``bs % ws`` ranks (sum = global batch)."""
    if global_batch < world_size:
        msg = (
            f"batch size {global_batch} is smaller than the number of processes {world_size}: "
            "every rank needs at least one sample (use fewer GPUs or a larger batch size)"
        )
        raise ConfigurationError(msg)
    base, extra = divmod(global_batch, world_size)
    return [base + (1 if r < extra else 0) for r in range(world_size)]


def split_batch(
    global_batch: int,
    world_size: int,
    rank: int,
    percent: float = OVERSAMPLE_FOREGROUND_PERCENT,
) -> RankBatch:
    """Rank ``rank``'s slice of the global batch and of its forced-foreground pattern.

    The forced positions are the slice of the single-process pattern, so the set of forced
    samples over all ranks is exactly one process's (e.g. bs 2, p 0.33: rank 0 none, rank 1 its
    one sample, which is upstream's per-rank oversampling 0.0 and 1.0).
    """
    sizes = batch_sizes(global_batch, world_size)
    offset = sum(sizes[:rank])
    pattern = forced_mask(global_batch, percent)
    return RankBatch(sizes[rank], offset, tuple(pattern[offset : offset + sizes[rank]]))


# ------------------------------------------------------------------------------ reductions
class AllReduceSum(torch.autograd.Function):
    """Differentiable SUM over ranks: forward sums the tensors, backward sums the gradients.

    The result on every rank depends on every rank's input, so each rank's input gradient is the
    sum of all ranks' incoming gradients (what the gradient of an all-gather + sum would be).
    """

    @staticmethod
    def forward(_ctx: Any, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    @staticmethod
    def backward(_ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        out = grad.contiguous().clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """``AllReduceSum`` when a group with several ranks exists, else ``tensor`` itself."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return AllReduceSum.apply(tensor)
    return tensor


def sum_over_ranks(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """Element-wise sum of float64 arrays over ranks (for logging; not differentiable)."""
    array = np.asarray(values, dtype=np.float64)
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return array
    tensor = torch.from_numpy(array.copy())
    if dist.get_backend() == "nccl":
        tensor = tensor.cuda()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.cpu().numpy()


def barrier() -> None:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def gather_descriptions(text: str) -> list[str]:
    """Every rank's ``text`` (rank order) where a group exists, else ``[text]``."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return _all_gather_strings(text)
    return [text]
