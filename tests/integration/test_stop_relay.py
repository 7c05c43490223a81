"""The per-node relay of a multi-node fold (nnunet_core.cluster.stop_relay), with real signals.

The setting it exists for, reproduced with real processes: the job step is a process group
(SLURM's proctrack/pgid), SIGUSR1 goes to that group, and the "agent" starts its workers in
sessions of their own, as torchrun does. The control test shows what happens without the relay.
The real torchrun + trainer version is in test_ddp_training.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nnunet_core.cluster.stop_relay import children_of

# An agent like torchrun's: no SIGUSR1 handler, workers in new sessions, exit 0 when they do.
AGENT = textwrap.dedent(
    """
    import subprocess, sys
    worker = (
        "import signal, sys, time, pathlib\\n"
        "out = pathlib.Path(sys.argv[1])\\n"
        "signal.signal(signal.SIGUSR1, lambda *_: (out.write_text('USR1'), sys.exit(0)))\\n"
        "out.with_suffix('.ready').touch()\\n"
        "time.sleep(60)\\n"
        "sys.exit(1)\\n"
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", worker, f"{sys.argv[1]}/worker{i}"],
                         start_new_session=True)
        for i in range(2)
    ]
    sys.exit(max(w.wait() for w in workers))
    """
)


def _start(command: list[str]) -> subprocess.Popen:
    """In a process group of its own, like a SLURM job step under proctrack/pgid."""
    return subprocess.Popen(command, start_new_session=True)


def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the workers to start")
        time.sleep(0.05)


def _workers_ready(folder: Path) -> bool:
    return all((folder / f"worker{i}.ready").exists() for i in range(2))


def test_usr1_to_the_step_reaches_the_workers_and_spares_the_agent(tmp_path) -> None:
    relay = _start([sys.executable, "-m", "nnunet_core.cluster.stop_relay", "--",
                    sys.executable, "-c", AGENT, str(tmp_path)])  # fmt: skip
    _wait_for(lambda: _workers_ready(tmp_path))
    os.killpg(relay.pid, signal.SIGUSR1)
    assert relay.wait(timeout=30) == 0  # the agent lived on and its workers exited 0
    for i in range(2):
        assert (tmp_path / f"worker{i}").read_text() == "USR1"


def test_without_the_relay_the_agent_dies_and_the_workers_never_hear(tmp_path) -> None:
    agent = _start([sys.executable, "-c", AGENT, str(tmp_path)])
    _wait_for(lambda: _workers_ready(tmp_path))
    workers = children_of(agent.pid)
    assert len(workers) == 2
    os.killpg(agent.pid, signal.SIGUSR1)
    assert agent.wait(timeout=30) == -signal.SIGUSR1
    assert not (tmp_path / "worker0").exists() and not (tmp_path / "worker1").exists()
    for pid in workers:  # orphans, as under a scheduler that tracks only the group
        os.kill(pid, signal.SIGKILL)


def test_sigterm_is_passed_to_the_agent(tmp_path) -> None:
    script = "import signal, sys, time\nsignal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
    script += f"open({str(tmp_path / 'ready')!r}, 'w').close()\ntime.sleep(60)\n"
    relay = subprocess.Popen(
        [sys.executable, "-m", "nnunet_core.cluster.stop_relay", sys.executable, "-c", script]
    )
    _wait_for(lambda: (tmp_path / "ready").exists())
    relay.send_signal(signal.SIGTERM)  # to the relay only: it must pass it on
    assert relay.wait(timeout=30) == 7


def test_exit_status_is_the_agents() -> None:
    relay = [sys.executable, "-m", "nnunet_core.cluster.stop_relay"]
    assert subprocess.run([*relay, "sh", "-c", "exit 3"]).returncode == 3
    missing = subprocess.run([*relay, "no-such-agent"], capture_output=True, text=True)
    assert missing.returncode == 127 and "command not found: no-such-agent" in missing.stderr
    assert subprocess.run(relay, capture_output=True).returncode == 2
