"""GPU slot locks with fake GPU counts: real processes compete for real flock'ed files.

There is no GPU here: ``nnUNet_num_gpus`` mocks the GPU count, so the locks are the real ones
and only CUDA is absent. Folds sharing a GPU (``folds_per_gpu`` k): k holders in separate
processes share one GPU and a (k+1)-th waits until one ends; holders of different k never claim
more than a whole GPU together. A prediction (``predict --gpu-slot``) takes a whole GPU through
the same locks. A ``CUDA_VISIBLE_DEVICES`` exported on a workstation is the pool the slots divide
(the mocked GPUs are then its entries); a scheduler's stands.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from nnunet_core.cluster import gpu_slots
from nnunet_core.cluster.gpu_slots import acquire_gpus, release_all
from nnunet_core.errors import ConfigurationError

HOLDER = """
import functools, os, sys
from nnunet_core.cluster import gpu_slots
gpu_slots.acquire_gpus = functools.partial(gpu_slots.acquire_gpus, poll_seconds=0.05)
if sys.argv[3] == "predict":  # as predict --gpu-slot takes it
    gpu_slots.take_slots_for("cuda", int(sys.argv[2]), sys.argv[1], folds_per_gpu=1)
else:  # as a fold (train) takes it
    gpu_slots.take_slots_for("auto", int(sys.argv[2]), sys.argv[1])
print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.read()  # hold the slots until the test closes stdin (or kills us)
"""
OWN = ("CUDA_VISIBLE_DEVICES", gpu_slots.HELD_ENV, "SLURM_JOB_ID", "LSB_JOBID")


def holder(
    lock_dir: Path,
    count: int = 1,
    *,
    folds_per_gpu: int = 1,
    gpus: int = 5,
    kind: str = "fold",
    visible: str | None = None,
) -> subprocess.Popen:
    """A job (``kind`` fold or predict) holding ``count`` GPU slots in its own process
    (``nnUNet_num_gpus`` mocks GPUs; ``visible``: the user's exported CUDA_VISIBLE_DEVICES)."""
    env = {k: v for k, v in os.environ.items() if k not in OWN}
    env["nnUNet_num_gpus"] = str(gpus)
    env["nnUNet_folds_per_gpu"] = str(folds_per_gpu)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_dir), str(count), kind],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_five_concurrent_jobs_get_five_different_gpus_and_a_killed_one_frees_its_slot(
    tmp_path: Path,
) -> None:
    processes = [holder(tmp_path) for _ in range(5)]  # started together: they race for locks
    try:
        ids = [p.stdout.readline().strip() for p in processes]
        assert sorted(ids) == ["0", "1", "2", "3", "4"]
        env = {"nnUNet_num_gpus": "5"}
        with pytest.raises(ConfigurationError, match="no 1 free GPU slot"):
            acquire_gpus(1, tmp_path, environ=env, poll_seconds=0.05, timeout=0.3)
        victim = processes[2]
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        assert acquire_gpus(1, tmp_path, environ=env, poll_seconds=0.05, timeout=10) == [
            int(ids[2])
        ]
        assert env["CUDA_VISIBLE_DEVICES"] == ids[2]
    finally:
        release_all()
        stop(processes)


def test_a_waiting_job_gets_the_slots_when_they_are_freed(tmp_path: Path) -> None:
    first = holder(tmp_path, 4)
    try:
        assert first.stdout.readline().strip() == "0,1,2,3"
        second = holder(tmp_path, 2)  # only slot 4 is free: waits, taking nothing meanwhile
        try:
            assert "waiting for 2 free GPU slot(s) of 5" in second.stderr.readline()
            first.stdin.close()  # first finishes; the kernel frees its locks
            assert second.stdout.readline().strip() == "0,1"
        finally:
            stop([second])
    finally:
        stop([first])


@pytest.mark.parametrize("job", ["SLURM_JOB_ID", "LSB_JOBID"])
def test_nothing_happens_when_a_scheduler_chose_or_there_is_no_gpu(
    tmp_path: Path, job: str
) -> None:
    env = {"CUDA_VISIBLE_DEVICES": "3", job: "12", "nnUNet_num_gpus": "8"}
    assert acquire_gpus(1, tmp_path, environ=env) is None
    assert env["CUDA_VISIBLE_DEVICES"] == "3"  # the job's own GPU, untouched
    assert list(tmp_path.iterdir()) == []  # no lock taken
    assert acquire_gpus(1, tmp_path, environ={"nnUNet_num_gpus": "0"}) is None
    for none in ("", "-1"):  # an exported "no GPU" stays so
        assert acquire_gpus(1, tmp_path, environ={"CUDA_VISIBLE_DEVICES": none}) is None
    with pytest.raises(ConfigurationError, match="2 GPUs requested but this machine has 1"):
        acquire_gpus(2, tmp_path, environ={"nnUNet_num_gpus": "1"})


# ------------------------------------------------------------------ folds sharing a GPU
def holders(lock_dir: Path, *kinds: int, gpus: int = 1) -> list[subprocess.Popen]:
    """One holder per entry (its folds_per_gpu), each started once the previous holds its GPU."""
    started = []
    for kind in kinds:
        started.append(holder(lock_dir, folds_per_gpu=kind, gpus=gpus))
        started[-1].stdout.readline()
    return started


def waits(process: subprocess.Popen) -> bool:
    """The holder said it waits, and holds nothing yet."""
    return "waiting for 1 free GPU slot(s)" in process.stderr.readline()


@pytest.mark.parametrize("k", [2, 3])
def test_k_folds_share_one_gpu_and_the_next_waits_for_one_to_end(tmp_path: Path, k: int) -> None:
    processes = [holder(tmp_path, folds_per_gpu=k, gpus=1) for _ in range(k)]  # they race
    try:
        assert [p.stdout.readline().strip() for p in processes] == ["0"] * k
        assert f"; {k} folds per GPU)" in processes[0].stderr.readline()
        late = holder(tmp_path, folds_per_gpu=k, gpus=1)
        processes.append(late)
        assert waits(late)
        processes[1].send_signal(signal.SIGKILL)  # the kernel frees its share file
        processes[1].wait(10)
        assert late.stdout.readline().strip() == "0"
        assert gpu_slots.claimed(tmp_path, 0) == 1  # k holders again, never k + 1
    finally:
        stop(processes)


def test_folds_spread_over_the_gpus_before_they_stack(tmp_path: Path) -> None:
    processes = []
    try:
        for expected in ("0", "1", "0", "1"):
            processes.append(holder(tmp_path, folds_per_gpu=2, gpus=2))
            assert processes[-1].stdout.readline().strip() == expected
        ddp = holder(tmp_path, 2, folds_per_gpu=2, gpus=2)  # DDP: one slot on each of 2 GPUs
        processes.append(ddp)
        assert "waiting for 2 free GPU slot(s) of 2" in ddp.stderr.readline()
        processes[0].stdin.close()  # room on GPU 0, none yet on GPU 1
        processes[1].stdin.close()
        assert ddp.stdout.readline().strip() == "0,1"
    finally:
        stop(processes)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param([1], 2, id="an-exclusive-fold-keeps-sharers-out"),
        pytest.param([2], 1, id="a-sharer-keeps-an-exclusive-fold-out"),
        pytest.param([2, 4, 4], 4, id="one-half-and-two-quarters-fill-the-gpu"),
        pytest.param([4, 4, 4], 2, id="three-quarters-leave-no-half"),
    ],
)
def test_mixed_folds_per_gpu_never_claim_more_than_the_gpu(
    tmp_path: Path, first: list[int], second: int
) -> None:
    processes = holders(tmp_path, *first)
    try:
        late = holder(tmp_path, folds_per_gpu=second, gpus=1)
        processes.append(late)
        assert waits(late)
        processes[0].stdin.close()
        assert late.stdout.readline().strip() == "0"
    finally:
        stop(processes)


def test_a_quarter_fits_beside_a_half_and_a_quarter(tmp_path: Path) -> None:
    processes = holders(tmp_path, 2, 4)
    try:
        processes.append(holder(tmp_path, folds_per_gpu=4, gpus=1))
        assert processes[-1].stdout.readline().strip() == "0"
        assert gpu_slots.claimed(tmp_path, 0) == Fraction(1)
    finally:
        stop(processes)


def test_sharers_and_a_plain_exclusive_flock_exclude_each_other(tmp_path: Path) -> None:
    """A job of a version without sharing only flocks gpu_<i>.lock exclusively."""
    gpu_lock = gpu_slots.gpu_lock_path(tmp_path, 0)
    sharers = holders(tmp_path, 2)
    try:
        with open(gpu_lock, "a+") as older:
            with pytest.raises(BlockingIOError):
                fcntl.flock(older.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        stop(sharers)
        with open(gpu_lock, "a+") as older:
            fcntl.flock(older.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            env = {"nnUNet_num_gpus": "1"}
            with pytest.raises(ConfigurationError, match="; 2 folds per GPU\\) after 0 s"):
                acquire_gpus(1, tmp_path, environ=env, folds_per_gpu=2, timeout=0.2)
    finally:
        release_all()
        stop(sharers)


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_wrong_folds_per_gpu_variable_is_one_line(tmp_path: Path, value: str) -> None:
    env = {"nnUNet_num_gpus": "1", "nnUNet_folds_per_gpu": value}
    message = f"^nnUNet_folds_per_gpu must be an integer >= 1, got '{value}'$"
    with pytest.raises(ConfigurationError, match=message):
        acquire_gpus(1, tmp_path, environ=env)


# ------------------------------------------------------------------ prediction jobs
def test_a_prediction_and_a_fold_started_together_get_different_gpus(tmp_path: Path) -> None:
    processes = [holder(tmp_path, kind="predict", gpus=2), holder(tmp_path, gpus=2)]  # they race
    try:
        assert sorted(p.stdout.readline().strip() for p in processes) == ["0", "1"]
    finally:
        stop(processes)


def test_a_prediction_takes_a_free_gpu_beside_a_fold_or_waits_for_a_whole_one(
    tmp_path: Path,
) -> None:
    fold = holder(tmp_path, folds_per_gpu=2, gpus=2)  # a fold sharing GPU 0 (half of it)
    processes = [fold]
    try:
        assert fold.stdout.readline().strip() == "0"
        processes.append(holder(tmp_path, kind="predict", gpus=2))
        assert processes[-1].stdout.readline().strip() == "1"  # not on the fold's GPU 0
        late = holder(tmp_path, kind="predict", gpus=2)  # half of GPU 0 is free: not enough
        processes.append(late)
        assert waits(late)
        fold.stdin.close()
        assert late.stdout.readline().strip() == "0"
    finally:
        stop(processes)


# ------------------------------------------------------------------ an exported pool
def test_two_folds_under_an_exported_pool_get_its_two_gpus(tmp_path: Path) -> None:
    processes = [holder(tmp_path, visible="0,1", gpus=8) for _ in range(2)]  # they race
    try:
        assert sorted(p.stdout.readline().strip() for p in processes) == ["0", "1"]
        env = {"CUDA_VISIBLE_DEVICES": "0,1", "nnUNet_num_gpus": "8"}  # the pool counts, not 8
        with pytest.raises(ConfigurationError, match="of 2 of CUDA_VISIBLE_DEVICES=0,1 \\("):
            acquire_gpus(1, tmp_path, environ=env, poll_seconds=0.05, timeout=0.2)
    finally:
        stop(processes)


def test_slot_k_of_a_pool_is_its_kth_entry_and_shares_that_gpus_lock(tmp_path: Path) -> None:
    first = holder(tmp_path, visible="3,7")
    processes = [first]
    try:
        assert first.stdout.readline().strip() == "3"
        processes.append(holder(tmp_path, visible="3,7", kind="predict"))
        assert processes[-1].stdout.readline().strip() == "7"
        assert gpu_slots.gpu_lock_path(tmp_path, 3).is_file()
        env = {"nnUNet_num_gpus": "8"}  # a job without the export sees GPU 3 and 7 held
        assert acquire_gpus(6, tmp_path, environ=env, timeout=5) == [0, 1, 2, 4, 5, 6]
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,4,5,6"
    finally:
        release_all()
        stop(processes)


def test_a_pool_is_read_as_cuda_reads_it_and_never_taken_twice(tmp_path: Path) -> None:
    assert gpu_slots.visible_entries(" 2, 5 ") == ["2", "5"]
    assert gpu_slots.visible_entries("2,-1,5") == ["2"]  # CUDA ignores what follows -1
    with pytest.raises(ConfigurationError, match="^3 GPUs requested but CUDA_VISIBLE_DEVICES"):
        acquire_gpus(3, tmp_path, environ={"CUDA_VISIBLE_DEVICES": "3,7"})
    env = {"CUDA_VISIBLE_DEVICES": "GPU-8f.c,MIG-GPU-1/2/0"}  # UUID names: plain file names
    try:
        assert acquire_gpus(2, tmp_path, environ=env, timeout=5) == [0, 1]
        assert env["CUDA_VISIBLE_DEVICES"] == "GPU-8f.c,MIG-GPU-1/2/0"
        names = {p.name for p in tmp_path.iterdir()}
        assert names == {"gpu_GPU-8f_c.lock", "gpu_MIG-GPU-1_2_0.lock"}
        # this process (or a child it starts) holds them: no second lock, no wait on itself
        assert acquire_gpus(1, tmp_path, environ=env, timeout=0.2) is None
    finally:
        release_all()


# ------------------------------------------------------------------ the workflow's side
def test_folds_share_gpus_only_in_local_gpu_runs() -> None:
    assert gpu_slots.folds_per_gpu_of_run(3, cluster=False, gpus_per_job=1) == 3
    assert gpu_slots.folds_per_gpu_of_run(3, cluster=True, gpus_per_job=1) == 1
    assert gpu_slots.folds_per_gpu_of_run(3, cluster=False, gpus_per_job=0) == 1  # CPU folds
    assert gpu_slots.cluster_notice(1, cluster=True) is None
    assert gpu_slots.cluster_notice(3, cluster=False) is None
    notice = gpu_slots.cluster_notice(3, cluster=True)
    assert notice.startswith("note: training.folds_per_gpu 3 applies to local runs only")


def test_the_slot_count_is_explained_where_snakemake_shows_it() -> None:
    assert gpu_slots.slot_notice(2, 1) is None
    assert gpu_slots.slot_notice(0, 3) is None  # no --resources gpu: the locks alone decide
    assert gpu_slots.slot_notice(2, 3) == (
        "training.folds_per_gpu 3: --resources gpu=2 counts 6 GPU slots; a fold job takes 1 "
        "slot per GPU (up to 3 folds share a GPU), a prediction job 3 (a whole GPU)"
    )
