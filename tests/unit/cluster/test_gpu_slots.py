"""GPU slot locks with fake GPU counts: real processes compete for real flock'ed files.

There is no GPU here: ``nnUNet_num_gpus`` mocks the GPU count, so the locks are the real ones
and only CUDA is absent. Folds sharing a GPU (``folds_per_gpu`` k): k holders in separate
processes share one GPU and a (k+1)-th waits until one ends; holders of different k never claim
more than a whole GPU together.
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
import os, sys
from nnunet_core.cluster.gpu_slots import acquire_gpus
gpus = acquire_gpus(int(sys.argv[2]), sys.argv[1], poll_seconds=0.05)
print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.read()  # hold the slots until the test closes stdin (or kills us)
"""


def holder(
    lock_dir: Path, count: int = 1, *, folds_per_gpu: int = 1, gpus: int = 5
) -> subprocess.Popen:
    """A job holding ``count`` GPU slots in its own process (``nnUNet_num_gpus`` mocks GPUs)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["nnUNet_num_gpus"] = str(gpus)
    env["nnUNet_folds_per_gpu"] = str(folds_per_gpu)
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock_dir), str(count)],
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


def test_nothing_happens_when_a_scheduler_chose_or_there_is_no_gpu(tmp_path: Path) -> None:
    assert acquire_gpus(1, tmp_path, environ={"CUDA_VISIBLE_DEVICES": "3"}) is None
    assert acquire_gpus(1, tmp_path, environ={"nnUNet_num_gpus": "0"}) is None
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
