"""Local GPU assignment with file locks: parallel fold jobs on a workstation get different GPUs.

Snakemake's ``gpu`` resource only counts; it never sets ``CUDA_VISIBLE_DEVICES``, so without help
every local fold would run on GPU 0. When no scheduler has set ``CUDA_VISIBLE_DEVICES``, the
training command takes N free slots here: one lock file per GPU (``gpu_<i>.lock``) in a lock
folder, each held with an exclusive ``flock`` by an open file. The kernel releases a lock when its
process ends in any way (SIGKILL included), so a stale lock file never blocks a GPU. It must run
before CUDA starts in this process (``CUDA_VISIBLE_DEVICES`` is read once, at CUDA's start).

Lock folder: ``--gpu-lock-dir``, else ``$nnUNet_gpu_lock_dir``, else
``<tmp>/nnunet_core_gpu_locks``.
GPU count: ``$nnUNet_num_gpus`` (also for tests), else the entries of
``/proc/driver/nvidia/gpus``; without GPUs nothing is done.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from nnunet_core.errors import ConfigurationError

LOCK_DIR_ENV = "nnUNet_gpu_lock_dir"
NUM_GPUS_ENV = "nnUNet_num_gpus"
NVIDIA_PROC = Path("/proc/driver/nvidia/gpus")
_HELD: list[IO[str]] = []  # open lock files of this process (released at exit by the kernel)


def default_lock_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(LOCK_DIR_ENV):
        return Path(env[LOCK_DIR_ENV])
    return Path(tempfile.gettempdir()) / "nnunet_core_gpu_locks"


def count_gpus(environ: Mapping[str, str] | None = None) -> int:
    """GPUs of this machine without starting CUDA (``$nnUNet_num_gpus`` overrides)."""
    env = os.environ if environ is None else environ
    if env.get(NUM_GPUS_ENV, "").strip():
        return int(env[NUM_GPUS_ENV])
    try:
        return sum(1 for _ in NVIDIA_PROC.iterdir())
    except OSError:
        return 0


def _try_lock(path: Path) -> IO[str] | None:
    import fcntl

    handle = open(path, "a+")  # noqa: SIM115 - held open for as long as the slot is ours
    try:
        os.chmod(path, 0o666)  # other users' jobs share the slots
    except OSError:
        pass
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def try_acquire(count: int, lock_dir: Path, num_gpus: int) -> list[int] | None:
    """Lock ``count`` free slots (lowest ids first) or none at all; returns their ids."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    taken: list[tuple[int, IO[str]]] = []
    for gpu in range(num_gpus):
        handle = _try_lock(lock_dir / f"gpu_{gpu}.lock")
        if handle is not None:
            taken.append((gpu, handle))
            if len(taken) == count:
                _HELD.extend(h for _, h in taken)
                return [g for g, _ in taken]
    for _, handle in taken:  # not enough free: give back what we took, try again later
        handle.close()
    return None


def release_all() -> None:
    while _HELD:
        _HELD.pop().close()


def acquire_gpus(
    count: int,
    lock_dir: str | os.PathLike | None = None,
    *,
    environ: dict[str, str] | None = None,
    poll_seconds: float = 10.0,
    timeout: float | None = None,
) -> list[int] | None:
    """Take ``count`` free GPU slots and set ``CUDA_VISIBLE_DEVICES``; None when not applicable.

    Not applicable: ``CUDA_VISIBLE_DEVICES`` is already set (a scheduler or the user chose), or
    the machine has no GPU. Waits, with a message, while fewer than ``count`` slots are free.
    """
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        return None
    num_gpus = count_gpus(env)
    if num_gpus == 0:
        return None
    if count > num_gpus:
        msg = f"{count} GPUs requested but this machine has {num_gpus}"
        raise ConfigurationError(msg)
    folder = Path(lock_dir) if lock_dir else default_lock_dir(env)
    start = time.monotonic()
    announced = False
    while True:
        gpus = try_acquire(count, folder, num_gpus)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
            print(
                f"using GPU slot(s) {env['CUDA_VISIBLE_DEVICES']} (locks in {folder})",
                file=sys.stderr,
                flush=True,
            )
            return gpus
        if timeout is not None and time.monotonic() - start > timeout:
            msg = f"no {count} free GPU slot(s) of {num_gpus} in {folder} after {timeout:.0f} s"
            raise ConfigurationError(msg)
        if not announced:
            print(
                f"waiting for {count} free GPU slot(s) of {num_gpus} (locks in {folder}) ...",
                file=sys.stderr,
                flush=True,
            )
            announced = True
        time.sleep(poll_seconds)
