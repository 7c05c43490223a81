"""The main process's stop ends every process below it: SIGINT first, SIGTERM after the grace,
SIGKILL after that (workflow.user_stop), with real child processes and shortened times."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from nnunet_core.workflow import user_stop

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")

IGNORES_ALL = textwrap.dedent("""
    import signal, time
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(60)
""")
# Ctrl-C's default, set explicitly: a test run started in the background (`cmd &` from a script)
# hands its children SIGINT ignored
STOPS_ON_SIGINT = textwrap.dedent("""
    import signal, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print("ready", flush=True)
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        pass
""")


def started(code: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    return child


def test_sigint_then_sigterm_then_sigkill_end_every_child(monkeypatch):
    monkeypatch.setattr(user_stop, "GRACE_S", 0.5)
    monkeypatch.setattr(user_stop, "KILL_S", 1.0)
    polite, stubborn = started(STOPS_ON_SIGINT), started(IGNORES_ALL)
    reaper = threading.Thread(target=lambda: (polite.wait(), stubborn.wait()), daemon=True)
    reaper.start()  # as Snakemake's job threads wait for their shells
    stop = user_stop.UserStop(workflow=None, root=os.getpid())
    begin = time.monotonic()
    stop.end_processes(begin)
    took = time.monotonic() - begin
    reaper.join(5)
    assert polite.returncode == 0  # its KeyboardInterrupt: ended by itself
    assert stubborn.returncode == -signal.SIGKILL
    assert 1.0 <= took < 3.0


def test_the_summary_names_the_signal_and_says_the_command_continues():
    stop = user_stop.UserStop(workflow=None, root=os.getpid())
    stop.signal = signal.SIGTERM
    assert stop.summary() == (
        "stopped by the user (SIGTERM): no job was running; the same command continues from there"
    )
