"""The processes below a pid, from /proc, with real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nnunet_core.workflow import process_tree

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


ROOT = """
import subprocess, sys
shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
print(shell.pid, flush=True)
sys.stdin.read()
"""


def test_a_grandchild_is_found_and_stays_tracked_after_its_parent_dies():
    # a root of its own (as Snakemake): the test worker's other children are none of its business
    # and must not be signalled; below it a shell (the job) whose child sleeps; the shell is
    # killed, the sleeper moves to init
    root = subprocess.Popen(
        [sys.executable, "-c", ROOT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    shell = int(root.stdout.readline())
    tracked = process_tree.Tracked(root.pid)
    try:
        deadline = time.time() + 10
        while len(tracked.seen) < 2 and time.time() < deadline:
            tracked.refresh()
            time.sleep(0.05)
        pids = {info.pid for info in tracked.living()}
        assert shell in pids and len(pids) == 2, pids
        os.kill(shell, signal.SIGKILL)
        deadline = time.time() + 10
        while shell in {info.pid for info in tracked.living()} and time.time() < deadline:
            time.sleep(0.05)
        assert shell not in {info.pid for info in tracked.living()}
        assert tracked.living(), "the orphaned sleeper is still tracked"
        assert tracked.signal_all(signal.SIGTERM) == 1
        assert tracked.signal_all(signal.SIGTERM) == 0  # each signal once
        deadline = time.time() + 10
        while tracked.living() and time.time() < deadline:
            time.sleep(0.05)
        assert not tracked.living()
    finally:
        for info in tracked.seen.values():
            process_tree.send(info, signal.SIGKILL)
        root.stdin.close()
        root.wait(timeout=10)


def test_a_reused_pid_is_not_the_same_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    info = process_tree.read(child.pid)
    assert info is not None and process_tree.alive(info)
    other = process_tree.ProcessInfo(info.pid, info.ppid, info.start + 1, info.state)
    assert not process_tree.alive(other) and not process_tree.send(other, signal.SIGKILL)
    child.kill()
    child.wait()
    assert not process_tree.alive(info) and process_tree.read(child.pid) is None
