"""GPU slot locks with fake GPU counts: real processes compete for real flock'ed files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core.cluster.gpu_slots import acquire_gpus, release_all
from nnunet_core.errors import ConfigurationError

HOLDER = """
import os, sys
from nnunet_core.cluster.gpu_slots import acquire_gpus
gpus = acquire_gpus(int(sys.argv[2]), sys.argv[1], poll_seconds=0.05)
print(os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
sys.stdin.read()  # hold the slots until the test closes stdin (or kills us)
"""


def holder(lock_dir: Path, count: int = 1) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["nnUNet_num_gpus"] = "5"
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
