"""Where the workflow's fold jobs train: the automatic `gpu` resource and device.

Decided in the Snakemake process that builds the DAG, which on a cluster is a login node without
GPUs, so the decision cannot ask torch: a cluster executor, ``--resources gpu=N`` or an NVIDIA
GPU on this machine means GPU jobs (one GPU per fold job); the job's trainer then picks CUDA
when its torch sees the GPU, else the CPU with a warning (``-device auto``). No torch import
here: the Snakefile is parsed by every job of the workflow.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnunet_core.cluster import gpu_slots

NVIDIA_GPU_FOLDER = Path("/proc/driver/nvidia/gpus")
# Below this many training iterations a CPU fold is a demo or a test, not a surprise.
LONG_CPU_SCHEDULE_ITERATIONS = 10_000


def visible_gpu_count(
    environ: Mapping[str, str] | None = None, gpu_folder: Path = NVIDIA_GPU_FOLDER
) -> int:
    """GPUs this process may use: those ``CUDA_VISIBLE_DEVICES`` names when set (a workstation's
    exported value is the pool the fold jobs' GPU slots divide), else the driver's GPUs."""
    environ = os.environ if environ is None else environ
    visible = environ.get(gpu_slots.VISIBLE_ENV)
    if visible is not None:
        return len(gpu_slots.visible_entries(visible))
    try:
        return sum(1 for _ in gpu_folder.iterdir())
    except OSError:
        return 0


def requested_gpus(global_resources: Mapping[str, Any]) -> int:
    """``--resources gpu=N`` of this run (0 when not given)."""
    value = global_resources.get("gpu")
    value = getattr(value, "value", value)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def on_cluster(workflow: Any) -> bool:
    """A cluster executor, or a job inside a cluster allocation. The Snakefile is parsed before
    the executor is known; ``--jobs`` (the profile's ``jobs:``) is set for cluster executors
    only (locally Snakemake turns it into --cores), dry runs too."""
    return bool(workflow.remote_exec or workflow.non_local_exec or workflow.nodes)


def gpus_per_fold_job(setting: int | None, *, cluster: bool, requested: int, visible: int) -> int:
    """``training.gpus_per_job``, or for ``null`` one GPU per fold job wherever GPUs exist."""
    if setting is not None:
        return int(setting)
    return 1 if cluster or requested > 0 or visible > 0 else 0


_PRINTED: set[str] = set()


def print_once(line: str | None) -> None:
    """A warning on stderr once per process: a run of several datasets or seeds parses
    common.smk once for each."""
    if line and line not in _PRINTED:
        _PRINTED.add(line)
        print(line, file=sys.stderr)


def cpu_schedule_warning(device: str, gpus: int, epochs: int, iterations: int) -> str | None:
    """One line for a long schedule that will train on the CPU (``device`` auto, no GPU)."""
    if (
        gpus > 0
        or device not in ("auto", "cpu")
        or epochs * iterations < LONG_CPU_SCHEDULE_ITERATIONS
    ):
        return None
    how = "training.device is cpu" if device == "cpu" else "no GPU found"
    return (
        f"warning: {how} (no --resources gpu=N, no cluster executor, no NVIDIA GPU visible): "
        f"the folds train on the CPU, {epochs} epochs x {iterations} iterations, which takes "
        "days per fold; each fold's log gives its epoch time and ETA. Give --resources gpu=N "
        "or set training.gpus_per_job, or shorten training.epochs for a trial run."
    )
