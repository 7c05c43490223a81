"""A stopped fold's exit status EXIT_STOPPED survives its launchers: ``-num_gpus N`` (our spawn)
and torchrun (``nnunet_core.training.torchrun_launch``), so the workflow's retry sees it. Real
processes; the ranks are stand-ins that exit with a chosen code."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.training import distributed


def exit_by_rank(codes: dict[str, int]) -> int:
    """A rank's return value, by its RANK (spawn sets it as torchrun does)."""
    return codes[os.environ["RANK"]]


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ({"0": EXIT_STOPPED, "1": EXIT_STOPPED}, EXIT_STOPPED),  # every rank stopped
        ({"0": EXIT_STOPPED, "1": 3}, 3),  # a real failure is never hidden by a stop
    ],
)
def test_spawn_passes_the_stop_code_on(codes: dict[str, int], expected: int) -> None:
    assert distributed.spawn(2, exit_by_rank, codes) == expected


def torchrun_launch(rank_command: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnunet_core.training.torchrun_launch", "--standalone"]
    command += ["--nproc_per_node", "2", "--no-python", "bash", "-c", rank_command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_torchrun_launch_exits_with_the_stop_code_of_its_ranks() -> None:
    result = torchrun_launch(f"exit {EXIT_STOPPED}")
    assert result.returncode == EXIT_STOPPED, result.stderr[-2000:]
    assert "stopped cleanly" in result.stderr


def test_torchrun_launch_keeps_torchruns_failure_and_success() -> None:
    assert torchrun_launch("exit 3").returncode == 1  # torchrun's own status for a failure
    assert torchrun_launch("exit 0").returncode == 0
