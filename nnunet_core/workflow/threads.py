"""The `threads` of the fold and prediction jobs, which the jobs pass on as torch's threads
(``OMP_NUM_THREADS``): ``training.threads`` when set, else what fits the run.

A CPU job computes with torch alone, so by default it asks for every core given to the run
(Snakemake scales a job's threads down to ``--cores``): a lone job uses them all, and jobs ready
together run one after another instead of sharing the cores. A GPU job's CPUs go to its data
augmentation workers; torch gets what they leave of the job's share of the cores (at least 1).
On a cluster a GPU job's CPUs come from the profile (``cpus_per_gpu``), so its torch gets 1.
"""

from __future__ import annotations

import sys


def finite_cores(cores: int | None) -> int | None:
    """``--cores`` of this run; None where it was not given (a cluster executor)."""
    if cores is None or cores >= sys.maxsize or cores < 1:
        return None
    return int(cores)


def job_threads(
    setting: int | None,
    *,
    cpu_jobs: bool,
    cores: int | None,
    cluster: bool,
    parallel_gpu_jobs: int = 1,
    workers: int = 0,
) -> int:
    """Threads of one fold (``workers``: its augmentation workers) or prediction job (0).

    ``cpu_jobs``: the jobs compute on the CPU; ``cores``: ``--cores`` (None when not given);
    ``parallel_gpu_jobs``: GPU jobs that can run at once on this machine.
    """
    if setting is not None:
        return int(setting)
    cores = finite_cores(cores)
    if cpu_jobs:
        return cores or 1
    if cluster or cores is None:
        return 1
    share = cores // max(1, parallel_gpu_jobs)
    return max(1, share - workers)


def parallel_gpu_jobs(
    requested_gpus: int, visible_gpus: int, gpus_per_job: int, folds_per_gpu: int
) -> int:
    """GPU jobs running at once here: the GPU slots (``--resources gpu=K``, else the GPUs seen)
    over the GPUs each job takes."""
    gpus = requested_gpus or visible_gpus
    return max(1, gpus * max(1, folds_per_gpu) // max(1, gpus_per_job))
