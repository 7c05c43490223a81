"""Local GPU assignment with file locks: parallel fold jobs on a workstation get their own GPU, or
share one GPU k at a time (``training.folds_per_gpu``).

Snakemake's ``gpu`` resource only counts; it never sets ``CUDA_VISIBLE_DEVICES``, so without help
every local fold (and prediction) would run on GPU 0. Unless a scheduler set
``CUDA_VISIBLE_DEVICES``, the training command (and ``predict --gpu-slot``, the workflow's
prediction jobs) takes slots here and sets ``CUDA_VISIBLE_DEVICES`` to their GPUs. The GPUs the
slots divide (the pool): the machine's (0 .. n-1), or the entries of a ``CUDA_VISIBLE_DEVICES``
the user exported on a workstation (slot k is the pool's k-th entry: "2,5" gives 2 and 5). Under
SLURM or LSF (``environment.scheduler_of``) the job's own value stands untouched, as it does in a
process whose parent took the slots (``$nnUNet_gpu_slots_held``). Every lock is a
``flock`` held by an open file; the kernel releases it when its process ends in any way (SIGKILL
included), so a stale lock file never blocks a GPU. It must run before CUDA starts in this
process (``CUDA_VISIBLE_DEVICES`` is read once, at CUDA's start).

A job with folds_per_gpu k claims 1/k of each GPU it uses; the claims on a GPU never add up to
more than one GPU, whatever k each job (or workflow) sharing the lock folder has:
- k = 1: an exclusive flock on ``gpu_<i>.lock`` (as before folds could share, so older versions
  sharing the folder stay correct);
- k > 1: a shared flock on ``gpu_<i>.lock`` (no exclusive holder can come in, and none is there)
  and an exclusive flock on one share file ``gpu_<i>.<j>.lock`` holding ``folds_per_gpu=k``, taken
  under the folder's mutex ``gpu_slots.mutex`` after summing the claims of the held share files.
So k jobs of k share one GPU and a (k+1)-th waits; a k = 1 job waits for a GPU no share holds;
a k = 2 fold and two k = 4 folds fit on one GPU. GPUs with the least claimed go first, so folds
spread over the GPUs before they stack.

Lock folder: ``--gpu-lock-dir``, else ``$nnUNet_gpu_lock_dir``, else
``<tmp>/nnunet_core_gpu_locks-<uid>``. It is private to the user: created 0700, and an existing
one must be a real folder of the user that group and others cannot write (else one line, nothing
written), so a planted link can never turn a lock into a write to someone's file. The slots
therefore coordinate one user's runs (any number of workflows); other users' jobs on the same
GPUs are not seen: a machine shared by several people needs a scheduler.
GPU count without an exported pool: ``$nnUNet_num_gpus`` (also for tests), else the entries of
``/proc/driver/nvidia/gpus``; without GPUs nothing is done. Lock files are named by the pool's
entries (``gpu_2.lock``), so runs with and without an exported pool share each GPU's lock.
Folds per GPU: ``$nnUNet_folds_per_gpu`` (the workflow sets it from ``training.folds_per_gpu``),
else 1.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import IO

from nnunet_core.cluster.environment import scheduler_of
from nnunet_core.cluster.local import LocalEnvironment
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.locks import (
    held,
    open_lock_file,
    private_folder,
    read_holder,
    try_lock,
    write_holder,
)

LOCK_DIR_ENV = "nnUNet_gpu_lock_dir"
NUM_GPUS_ENV = "nnUNet_num_gpus"
FOLDS_PER_GPU_ENV = "nnUNet_folds_per_gpu"
HELD_ENV = "nnUNet_gpu_slots_held"  # the CUDA_VISIBLE_DEVICES this process tree holds slots for
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# GPU devices of ``-device``: the ones that may run on a GPU and so take slots
GPU_DEVICES = (None, "auto", "cuda")
MUTEX_NAME = "gpu_slots.mutex"
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
_CLAIM = re.compile(r"folds_per_gpu=(\d+)")
_HELD: list[IO[str]] = []  # open lock files of this process (released at exit by the kernel)


def default_lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$nnUNet_gpu_lock_dir``, else a folder of this user in the temporary folder."""
    env = os.environ if environ is None else environ
    if env.get(LOCK_DIR_ENV):
        return Path(env[LOCK_DIR_ENV])
    user = os.getuid() if hasattr(os, "getuid") else getpass.getuser()
    return Path(tempfile.gettempdir()) / f"nnunet_core_gpu_locks-{user}"


def private_lock_dir(folder: Path) -> Path:
    """``folder`` created 0700, or checked to be a real folder of ours closed to others."""
    remedy = (
        "GPU slot locks are kept only in a real folder of yours that nobody else can write: "
        "remove it or make it private (chmod 700), or name another with --gpu-lock-dir "
        f"(training.gpu_lock_dir, ${LOCK_DIR_ENV})"
    )
    return private_folder(folder, what="GPU lock folder", remedy=remedy)


def count_gpus(environ: Mapping[str, str] | None = None) -> int:
    """GPUs of this machine without starting CUDA (``$nnUNet_num_gpus`` overrides)."""
    env = os.environ if environ is None else environ
    if env.get(NUM_GPUS_ENV, "").strip():
        return int(env[NUM_GPUS_ENV])
    try:
        return sum(1 for _ in NVIDIA_PROC.iterdir())
    except OSError:
        return 0


def visible_entries(value: str) -> list[str]:
    """The devices a ``CUDA_VISIBLE_DEVICES`` value names, as CUDA reads it: up to the first
    entry starting with ``-`` (``-1``, ``""``: none)."""
    entries = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def gpu_pool(environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The GPUs the slots divide, by their ``CUDA_VISIBLE_DEVICES`` names; None: leave
    ``CUDA_VISIBLE_DEVICES`` as it is (a scheduler's per-job value, or slots already held)."""
    env = os.environ if environ is None else environ
    if VISIBLE_ENV not in env:
        return [str(gpu) for gpu in range(count_gpus(env))]
    if env.get(HELD_ENV) == env[VISIBLE_ENV]:
        return None  # this process or its parent took these slots (and holds them)
    if not isinstance(scheduler_of(env), LocalEnvironment):
        return None
    return visible_entries(env[VISIBLE_ENV])


def folds_per_gpu_of(environ: Mapping[str, str] | None = None) -> int:
    """``$nnUNet_folds_per_gpu`` (1 when unset); a wrong value is one clear line."""
    env = os.environ if environ is None else environ
    text = env.get(FOLDS_PER_GPU_ENV, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        msg = f"{FOLDS_PER_GPU_ENV} must be an integer >= 1, got {text!r}"
        raise ConfigurationError(msg)
    return int(text)


def _file_name(gpu: int | str) -> str:
    """A GPU's name in file names: a UUID or MIG name keeps letters, digits and ``-`` only
    (no ``.``, which separates a share file's index)."""
    return re.sub(r"[^A-Za-z0-9-]", "_", str(gpu))


def gpu_lock_path(folder: Path, gpu: int | str) -> Path:
    return folder / f"gpu_{_file_name(gpu)}.lock"


def share_lock_path(folder: Path, gpu: int | str, index: int) -> Path:
    return folder / f"gpu_{_file_name(gpu)}.{index}.lock"


def _lock(path: Path, *, shared: bool = False) -> IO[str] | None:
    """``path`` locked without waiting, else None; a file system without locks counts as held."""
    handle = open_lock_file(path)
    try:
        locked = try_lock(handle, shared=shared)
    except OSError:
        locked = False
    if locked:
        return handle
    handle.close()
    return None


def _write_owner(handle: IO[str], folds_per_gpu: int) -> None:
    write_holder(handle, f"pid={os.getpid()} folds_per_gpu={folds_per_gpu}")


@contextlib.contextmanager
def _folder_mutex(folder: Path) -> Iterator[None]:
    """Only one process at a time sums a GPU's claims and takes a share (milliseconds)."""
    with held(folder / MUTEX_NAME):
        yield


def _share_indices(folder: Path, gpu: int | str) -> list[int]:
    name = _file_name(gpu)
    pattern = re.compile(rf"gpu_{re.escape(name)}\.(\d+)\.lock")
    found = (pattern.fullmatch(p.name) for p in folder.glob(f"gpu_{name}.*.lock"))
    return sorted(int(m.group(1)) for m in found if m)


def claimed(folder: Path, gpu: int | str) -> Fraction:
    """The part of a GPU that holders of its share files claim (call under the mutex)."""
    total = Fraction(0)
    for index in _share_indices(folder, gpu):
        with open_lock_file(share_lock_path(folder, gpu, index)) as probe:
            try:
                free = try_lock(probe)
            except OSError:
                free = False
            if free:  # nobody holds it
                continue
            match = _CLAIM.search(read_holder(probe))  # read through the checked file
        total += Fraction(1, int(match.group(1))) if match else Fraction(1)  # unreadable: all
    return total


def _take_share(folder: Path, gpu: str, folds_per_gpu: int) -> list[IO[str]] | None:
    """Shared lock on the GPU and a free share file; None while a k = 1 job holds the GPU."""
    shared = _lock(gpu_lock_path(folder, gpu), shared=True)
    if shared is None:
        return None
    index = 0
    while (share := _lock(share_lock_path(folder, gpu, index))) is None:
        index += 1
    _write_owner(share, folds_per_gpu)
    return [shared, share]


def _try_exclusive(count: int, folder: Path, pool: list[str]) -> list[int] | None:
    taken: list[tuple[int, IO[str]]] = []
    for slot, gpu in enumerate(pool):
        handle = _lock(gpu_lock_path(folder, gpu))
        if handle is not None:
            _write_owner(handle, 1)
            taken.append((slot, handle))
            if len(taken) == count:
                _HELD.extend(h for _, h in taken)
                return [g for g, _ in taken]
    for _, handle in taken:  # not enough free: give back what we took, try again later
        handle.close()
    return None


def _try_shared(count: int, folder: Path, pool: list[str], folds_per_gpu: int) -> list[int] | None:
    claim = Fraction(1, folds_per_gpu)
    with _folder_mutex(folder):
        loads = [claimed(folder, gpu) for gpu in pool]
        taken: dict[int, list[IO[str]]] = {}
        for slot in sorted(range(len(pool)), key=lambda s: (loads[s], s)):  # least claimed first
            if loads[slot] + claim > 1:
                continue
            handles = _take_share(folder, pool[slot], folds_per_gpu)
            if handles is not None:
                taken[slot] = handles
                if len(taken) == count:
                    _HELD.extend(h for hs in taken.values() for h in hs)
                    return sorted(taken)
        for handles in taken.values():  # not enough room: give back what we took
            for handle in handles:
                handle.close()
    return None


def try_acquire(
    count: int, lock_dir: Path, pool: list[str], folds_per_gpu: int = 1
) -> list[int] | None:
    """Lock one slot on each of ``count`` GPUs of ``pool``, or nothing at all; returns the
    slots (positions in the pool)."""
    private_lock_dir(lock_dir)
    if folds_per_gpu == 1:
        return _try_exclusive(count, lock_dir, pool)
    return _try_shared(count, lock_dir, pool, folds_per_gpu)


def release_all() -> None:
    while _HELD:
        _HELD.pop().close()


def _sharing_note(folds_per_gpu: int) -> str:
    return "" if folds_per_gpu == 1 else f"; {folds_per_gpu} folds per GPU"


def acquire_gpus(
    count: int,
    lock_dir: str | os.PathLike | None = None,
    *,
    environ: dict[str, str] | None = None,
    poll_seconds: float = 10.0,
    timeout: float | None = None,
    folds_per_gpu: int | None = None,
) -> list[int] | None:
    """Take a slot on ``count`` GPUs of the pool and set ``CUDA_VISIBLE_DEVICES``; returns the
    slots (positions in the pool), None when not applicable.

    Not applicable: a scheduler set ``CUDA_VISIBLE_DEVICES`` for the job, a parent process took
    the slots, or there is no GPU (none visible). Waits, with a message, while fewer than
    ``count`` GPUs have room. ``folds_per_gpu``: None reads ``$nnUNet_folds_per_gpu``. A lock
    folder (or lock file) that is a link, someone else's or writable by others is refused in one
    line (``UnsafeLockError``).
    """
    env = os.environ if environ is None else environ
    pool = gpu_pool(env)
    if not pool:
        return None
    exported = env.get(VISIBLE_ENV)
    if count > len(pool):
        where = "this machine has" if exported is None else f"{VISIBLE_ENV}={exported} names"
        msg = f"{count} GPUs requested but {where} {len(pool)}"
        raise ConfigurationError(msg)
    sharing = folds_per_gpu_of(env) if folds_per_gpu is None else folds_per_gpu
    folder = private_lock_dir(Path(lock_dir) if lock_dir else default_lock_dir(env))
    of_pool = "" if exported is None else f" of {VISIBLE_ENV}={exported}"
    where = f"locks in {folder}{_sharing_note(sharing)}"
    start = time.monotonic()
    announced = False
    while True:
        slots = try_acquire(count, folder, pool, sharing)
        if slots is not None:
            env[VISIBLE_ENV] = env[HELD_ENV] = ",".join(pool[s] for s in slots)
            print(
                f"using GPU slot(s) {env[VISIBLE_ENV]}{of_pool} ({where})",
                file=sys.stderr,
                flush=True,
            )
            return slots
        if timeout is not None and time.monotonic() - start > timeout:
            msg = (
                f"no {count} free GPU slot(s) of {len(pool)}{of_pool} ({where}) after "
                f"{timeout:.0f} s"
            )
            raise ConfigurationError(msg)
        if not announced:
            print(
                f"waiting for {count} free GPU slot(s) of {len(pool)}{of_pool} ({where}) ...",
                file=sys.stderr,
                flush=True,
            )
            announced = True
        time.sleep(poll_seconds)


def take_slots_for(
    device: str | None,
    count: int,
    lock_dir: str | os.PathLike | None = None,
    *,
    folds_per_gpu: int | None = None,
) -> list[int] | None:
    """The slots of a job (a fold, a prediction) on ``-device`` ``device``: only one that may
    run on a GPU (auto, cuda, unset) takes them, before CUDA starts in this process."""
    if device not in GPU_DEVICES:
        return None
    return acquire_gpus(count, lock_dir, folds_per_gpu=folds_per_gpu)


# ------------------------------------------------------------------ the workflow's side
def folds_per_gpu_of_run(setting: int, *, cluster: bool, gpus_per_job: int) -> int:
    """``training.folds_per_gpu`` where the slot locks apply (local GPU jobs), else 1.

    Under a cluster executor the scheduler gives every job its own GPUs (``CUDA_VISIBLE_DEVICES``)
    and the locks are not used; sharing a GPU there is the site's business (SLURM shards, MPS).
    """
    return 1 if cluster or gpus_per_job == 0 else int(setting)


def cluster_notice(setting: int, *, cluster: bool) -> str | None:
    """The one line telling that ``training.folds_per_gpu`` does not apply to cluster jobs."""
    if not cluster or setting == 1:
        return None
    return (
        f"note: training.folds_per_gpu {setting} applies to local runs only (the GPU slot locks); "
        "under a cluster executor each fold job gets its own GPU(s) from the scheduler. To pack "
        "folds on one GPU there, ask the site's GPU sharing (SLURM shards, MPS) in the profile."
    )


def slot_notice(requested_gpus: int, folds_per_gpu: int) -> str | None:
    """The line explaining why Snakemake shows ``gpu`` k times what the user gave."""
    if folds_per_gpu == 1 or requested_gpus == 0:
        return None
    return (
        f"training.folds_per_gpu {folds_per_gpu}: --resources gpu={requested_gpus} counts "
        f"{requested_gpus * folds_per_gpu} GPU slots; a fold job takes 1 slot per GPU (up to "
        f"{folds_per_gpu} folds share a GPU), a prediction job {folds_per_gpu} (a whole GPU)"
    )
