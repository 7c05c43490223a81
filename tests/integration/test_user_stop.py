"""A user's stop of a real local run reads as a stop, and the same command continues.

A real Snakemake run of the tiny workflow trains fold 0 (checkpoint_latest only every 50
epochs); SIGINT goes to the Snakemake process alone, as a login node's ``kill -INT`` sends it.
Every process the run started is gone within 15 s, the fold stopped at its epoch boundary with a
checkpoint_latest, the console ends with the stop's line and holds no exception text, Snakemake
exits 130 and retried nothing. The same command then continues the fold from that epoch, the
first attempt's job log kept beside the new one; SIGTERM to Snakemake stops that run the same way.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from nnunet_core.cluster.exit_codes import EXIT_INTERRUPTED
from nnunet_core.layout.results import CHECKPOINT_LATEST, SUMMARY_JSON, VALIDATION_FOLDER
from nnunet_core.workflow.process_tree import Tracked
from tests.helpers.workflow import DATASET, copy_prepared, prepared_config, start_snakemake

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
LIMIT_S = 15.0
CRASH_WORDS = ("Exception", "Traceback", "RuleException", "WorkflowError", "Error in rule")


def config_for(work: Path) -> dict:
    config = prepared_config(work)
    config["training"].update(folds=[0], epochs=100, save_every=50, num_workers=1)
    config["training"].update(iterations_per_epoch=4, val_iterations_per_epoch=1)
    return config


def fold(work: Path) -> Path:
    return work / "results" / DATASET / MODEL / "fold_0"


def job_log(work: Path) -> Path:
    return work / "logs" / DATASET / "train_3d_fullres_fold0.log"


def started_epochs(work: Path) -> int:
    """Epochs the fold's training logs (every attempt's) record a start of."""
    text = "".join(p.read_text() for p in fold(work).glob("training_log_*.txt"))
    return len(re.findall(r"^.*: Epoch \d+$", text, re.MULTILINE))


def start(workdir: Path, config: dict, work: Path) -> subprocess.Popen:
    """The fold's validation summary as the target: the run that trains fold 0."""
    return start_snakemake(workdir, config, str(fold(work) / VALIDATION_FOLDER / SUMMARY_JSON))


def wait_until(condition, process: subprocess.Popen, tracked: Tracked, timeout: float = 90.0):
    end = time.time() + timeout
    while time.time() < end:
        tracked.refresh()
        if condition():
            return
        if process.poll() is not None:
            pytest.fail(f"snakemake ended early ({process.returncode}):\n{process.stdout.read()}")
        time.sleep(0.1)
    process.kill()
    pytest.fail(f"timed out:\n{process.communicate()[0]}")


def stop(process: subprocess.Popen, tracked: Tracked, signum: int) -> tuple[float, str]:
    """``signum`` to Snakemake alone; returns how long until every process it started was gone,
    and its console."""
    tracked.refresh()
    assert tracked.living(), "no job process was running"
    sent = time.monotonic()
    process.send_signal(signum)
    gone_after = None
    while time.monotonic() - sent < 60:
        tracked.refresh()  # also what starts after the signal (a retry would)
        if gone_after is None and not tracked.living():
            gone_after = time.monotonic() - sent
        if gone_after is not None and process.poll() is not None:
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    output = process.communicate()[0]
    assert gone_after is not None, f"processes still running: {tracked.living()}\n{output}"
    return gone_after, output


def assert_reads_as_stop(output: str, returncode: int, name: str) -> int:
    """The console's last line is the stop's; returns the epoch it names."""
    for word in CRASH_WORDS:
        assert word not in output, output
    last = output.strip().splitlines()[-1]
    match = re.fullmatch(
        rf"stopped by the user \({name}\): 3d_fullres fold 0 at epoch (\d+); "
        "the same command continues from there",
        last,
    )
    assert match, output
    assert "Trying to restart" not in output
    assert returncode == EXIT_INTERRUPTED, output
    return int(match.group(1))


def latest_epoch(work: Path) -> int:
    state = torch.load(fold(work) / CHECKPOINT_LATEST, map_location="cpu", weights_only=True)
    return int(state["current_epoch"])


def test_sigint_then_sigterm_to_snakemake_alone(prepared_work, tmp_path):
    work = copy_prepared(prepared_work, tmp_path / "work")
    config = config_for(work)

    process = start(tmp_path, config, work)
    tracked = Tracked(process.pid)
    wait_until(lambda: started_epochs(work) >= 2, process, tracked)
    gone_after, output = stop(process, tracked, signal.SIGINT)
    assert gone_after < LIMIT_S, output
    epoch = assert_reads_as_stop(output, process.returncode, "SIGINT")
    # saved at the epoch boundary by the stop (save_every is 50), the epoch the line names
    assert epoch >= 2 and latest_epoch(work) == epoch
    first_attempt = job_log(work).read_text()
    assert "stopped at epoch" in first_attempt and "by the user (SIGINT)" in first_attempt
    assert f"exit {EXIT_INTERRUPTED} (not retried)" in first_attempt

    process = start(tmp_path, config, work)
    tracked = Tracked(process.pid)
    wait_until(lambda: started_epochs(work) >= epoch + 1, process, tracked)
    current = job_log(work).read_text()
    assert re.search(rf"continuing from \S+{CHECKPOINT_LATEST} at epoch {epoch}\b", current)
    kept = job_log(work).with_name(job_log(work).name + ".1")
    assert kept.read_text() == first_attempt  # the earlier attempt's lines are still in logs/
    gone_after, output = stop(process, tracked, signal.SIGTERM)
    assert gone_after < LIMIT_S, output
    assert assert_reads_as_stop(output, process.returncode, "SIGTERM") > epoch
    assert not os.path.exists(job_log(work).with_name(job_log(work).name + ".2"))
