"""How many CPUs a job has and how many data-augmentation workers a fold job starts by default.

No torch here: the workflow's Snakefile asks this while it builds the DAG (every job parses it),
and the trainer asks it when it starts its workers, so both count the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nnunet_core.errors import NnunetCoreError

MAX_DEFAULT_WORKERS = 12
WORKERS_VARIABLE = "nnUNet_n_proc_DA"


class WorkerCountError(NnunetCoreError):
    """``$nnUNet_n_proc_DA`` is not a whole number."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a SLURM or taskset allocation)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - macOS, Windows


def default_num_workers(environ: Mapping[str, str] | None = None) -> int:
    """``$nnUNet_n_proc_DA`` if set, else ``min(usable CPUs, 12)`` (upstream's rule)."""
    environ = os.environ if environ is None else environ
    value = environ.get(WORKERS_VARIABLE)
    if value is not None and value.strip():
        try:
            return max(0, int(value))
        except ValueError:
            msg = f"{WORKERS_VARIABLE} must be an integer, got {value!r}"
            raise WorkerCountError(msg) from None
    return min(usable_cpus(), MAX_DEFAULT_WORKERS)
