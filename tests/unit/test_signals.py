"""The stop flag, deadlines (incl. the SLURM end time), the combined check and the fold lock."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.training import signals
from nnunet_core.training.determinism import enable_determinism, is_deterministic
from nnunet_core.training.fold_lock import FoldLock, FoldLockedError

needs_usr1 = pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 here")


@pytest.fixture
def restore_usr1():
    if not hasattr(signal, "SIGUSR1"):
        yield
        return
    before = signal.getsignal(signal.SIGUSR1)
    signals.reset_stop_request()
    yield
    signal.signal(signal.SIGUSR1, before)
    signals.reset_stop_request()


@needs_usr1
def test_usr1_only_sets_the_flag(restore_usr1) -> None:
    assert signals.install_stop_handler()
    assert not signals.stop_requested()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert signals.stop_requested()  # and the process is alive


@needs_usr1
def test_ignored_usr1_is_inherited_through_exec(restore_usr1) -> None:
    script = "kill -USR1 $$; echo alive"
    signals.ignore_stop_signal()
    survived = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert survived.returncode == 0 and survived.stdout.strip() == "alive"
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    died = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert died.returncode == -signal.SIGUSR1  # what the rule's shell would do by default


@needs_usr1
def test_forwarding_handler_signals_the_children(restore_usr1) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], stdout=subprocess.DEVNULL
    )
    try:
        signals.install_forwarding_handler(lambda: [child.pid])
        os.kill(os.getpid(), signal.SIGUSR1)
        assert child.wait(timeout=20) == -signal.SIGUSR1
        assert signals.stop_requested()
    finally:
        child.kill()
        child.wait()


def test_parse_deadline_forms() -> None:
    now = dt.datetime(2025, 3, 1, 10, 0, 0).timestamp()
    assert signals.parse_deadline("3600", now) == now + 3600
    assert signals.parse_deadline("90.5", now) == now + 90.5
    assert signals.parse_deadline("12:30", now) == dt.datetime(2025, 3, 1, 12, 30).timestamp()
    assert signals.parse_deadline("09:00:30", now) == dt.datetime(2025, 3, 2, 9, 0, 30).timestamp()
    iso = "2025-03-04T05:06:07"
    assert signals.parse_deadline(iso, now) == dt.datetime.fromisoformat(iso).timestamp()
    for bad in ("soon", "-5", "0"):
        with pytest.raises(ConfigurationError, match="--deadline"):
            signals.parse_deadline(bad, now)


def test_slurm_end_time_from_env_squeue_and_scontrol() -> None:
    end = "2025-03-04T05:06:07"
    expected = dt.datetime.fromisoformat(end).timestamp()
    assert signals.slurm_end_time({}) is None
    assert signals.slurm_end_time({"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1741060000"}) == (
        1741060000.0
    )
    calls = []

    def fake(outputs):
        def run(command, **kwargs):
            calls.append(command[0])
            stdout, code = outputs[command[0]]
            return SimpleNamespace(stdout=stdout, returncode=code)

        return run

    job = {"SLURM_JOB_ID": "7"}
    assert signals.slurm_end_time(job, fake({"squeue": (end + "\n", 0)})) == expected
    scontrol = f"JobId=7 JobName=x\n   StartTime=2025-03-04T01:00:00 EndTime={end} Deadline=N/A"
    run = fake({"squeue": ("", 1), "scontrol": (scontrol, 0)})
    assert signals.slurm_end_time(job, run) == expected
    assert calls[-2:] == ["squeue", "scontrol"]
    assert signals.slurm_end_time(job, fake({"squeue": ("Unknown\n", 0)})) is None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_deadline_stops_when_the_next_epoch_would_not_fit() -> None:
    clock = FakeClock()
    # epochs take 10 s, the margin is 5 s: after 2 epochs (t=20) a third would end at 30 + 5
    stop = signals.StopConditions(1032.0, 5.0, clock=clock, signal_flag=lambda: False)
    stop.start()
    answers = []
    for epoch in range(4):
        clock.now += 10
        answers.append(stop(epoch))
        if answers[-1]:
            break
    assert answers == [False, True] and stop.reason == "deadline"
    assert stop.estimated_epoch_seconds() == 10


def test_signal_flag_and_other_ranks() -> None:
    clock = FakeClock()
    flag = signals.StopConditions(clock=clock, signal_flag=lambda: True)
    assert flag(0) and flag.reason == "SIGUSR1"
    other = signals.StopConditions(clock=clock, signal_flag=lambda: False, reduce=lambda f: True)
    assert other(0) and "another rank" in other.reason
    quiet = signals.StopConditions(clock=clock, signal_flag=lambda: False)
    assert not quiet(0) and quiet.reason is None
    assert signals.reduce_flag(True) and not signals.reduce_flag(False)  # no process group


def test_fold_lock_refuses_a_second_holder_and_frees_on_release(tmp_path) -> None:
    first = FoldLock(tmp_path / "fold_0")
    first.acquire()
    with pytest.raises(FoldLockedError, match=f"already being trained by pid {os.getpid()}"):
        FoldLock(tmp_path / "fold_0").acquire()
    first.release()
    with FoldLock(tmp_path / "fold_0"):
        pass


def test_fold_lock_is_released_when_the_holder_is_killed(tmp_path) -> None:
    code = (
        "import sys, time; from nnunet_core.training.fold_lock import FoldLock; "
        f"lock = FoldLock({str(tmp_path)!r}); lock.acquire(); print('locked', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FoldLockedError, match=f"pid {holder.pid}"):
            FoldLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with FoldLock(tmp_path):
        pass


def test_deterministic_mode() -> None:
    try:
        enable_determinism(3)
        assert is_deterministic() and not torch.backends.cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"]
    finally:
        torch.use_deterministic_algorithms(False)
