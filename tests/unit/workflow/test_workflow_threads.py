"""The default `threads` of fold and prediction jobs (training.threads null), which the jobs
pass on to torch: all of --cores for CPU jobs, what the augmentation workers leave on GPU jobs."""

from __future__ import annotations

import sys

import pytest

from nnunet_core.runtime.cpus import WorkerCountError, default_num_workers
from nnunet_core.workflow.threads import job_threads, parallel_gpu_jobs


def test_a_cpu_job_takes_every_core_of_the_run() -> None:
    assert job_threads(None, cpu_jobs=True, cores=2, cluster=False) == 2
    assert job_threads(None, cpu_jobs=True, cores=32, cluster=False, workers=12) == 32


def test_a_set_value_wins() -> None:
    assert job_threads(3, cpu_jobs=True, cores=32, cluster=False) == 3
    assert job_threads(3, cpu_jobs=False, cores=32, cluster=True) == 3


def test_a_gpu_job_gets_what_its_workers_leave_of_its_share() -> None:
    # 32 cores, 2 GPU jobs at once: 16 each, 12 of them for the augmentation workers
    assert job_threads(None, cpu_jobs=False, cores=32, cluster=False, parallel_gpu_jobs=2,
                       workers=12) == 4  # fmt: skip
    # 4 jobs of 12 workers on 32 cores: nothing left, torch still gets one thread
    assert job_threads(None, cpu_jobs=False, cores=32, cluster=False, parallel_gpu_jobs=4,
                       workers=12) == 1  # fmt: skip


def test_without_cores_one_thread() -> None:
    """A cluster executor (no --cores): the GPU job's CPUs come from the profile."""
    for cores in (None, sys.maxsize):
        assert job_threads(None, cpu_jobs=False, cores=cores, cluster=True) == 1
        assert job_threads(None, cpu_jobs=True, cores=cores, cluster=True) == 1


def test_parallel_gpu_jobs_count_slots_over_gpus_per_job() -> None:
    assert parallel_gpu_jobs(4, 0, 1, 1) == 4
    assert parallel_gpu_jobs(4, 0, 1, 2) == 8  # two folds per GPU
    assert parallel_gpu_jobs(0, 8, 2, 1) == 4  # the GPUs seen, 2 per DDP job
    assert parallel_gpu_jobs(0, 0, 1, 1) == 1


def test_default_workers_from_the_variable() -> None:
    assert default_num_workers({"nnUNet_n_proc_DA": "5"}) == 5
    assert 1 <= default_num_workers({}) <= 12
    with pytest.raises(WorkerCountError, match="nnUNet_n_proc_DA must be an integer, got 'x'"):
        default_num_workers({"nnUNet_n_proc_DA": "x"})
