"""Stopping before the walltime and continuing, with real processes and real signals.

SIGUSR1 in the middle of an epoch stops after it (exit EXIT_STOPPED with one stderr line naming
the fold, checkpoint_latest, no final; also under ``-num_gpus 2``); ``--c``
finishes; in deterministic mode the result is bitwise the uninterrupted run's, also after a
SIGKILL (which keeps the history before the checkpoint's epoch and marks the killed attempt in
provenance); the signal sent to a whole process group (a Snakemake-like parent, a shell, the
trainer) kills nobody, nor is one lost while the trainer starts; a deadline stops without a
signal; a second job on a fold is refused; kill -9 at random moments never loses a checkpoint.
Starts from the tiny dataset of the ``env`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.model import checkpoint as ckpt
from tests.helpers.training import CONFIG, DATASET, MODEL, check, check_stopped, cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 on this platform"),
]

EPOCHS = 4
# a checkpoint every epoch (the default is 10): the kills below need one after each
SCHEDULE = ["--epochs", str(EPOCHS), "--iterations", "8", "--val-iterations", "2"]
SCHEDULE += ["--save-every", "1"]
TRAIN = ["train", "900", CONFIG, "0", "-device", "cpu", "--num-workers", "0", "--deterministic"]


def results_env(env: dict[str, str], results: Path) -> dict[str, str]:
    return {**env, "nnUNet_results": str(results)}


def fold(results: Path) -> Path:
    return results / DATASET / MODEL / "fold_0"


def start(
    environment: dict[str, str], out: Path, *extra: str, schedule: list[str] = SCHEDULE
) -> subprocess.Popen:
    handle = open(out, "a")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        [sys.executable, "-m", "nnunet_core", *TRAIN, *schedule, *extra],
        env=environment,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )


def started_epochs(out: Path) -> list[int]:
    return [int(e) for e in re.findall(r": Epoch (\d+)$", out.read_text(), re.MULTILINE)]


def wait_for(condition, timeout: float = 120.0, process: subprocess.Popen | None = None) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if condition():
            return
        if process is not None and process.poll() is not None:
            pytest.fail(f"process ended early with {process.returncode}")
        time.sleep(0.02)
    pytest.fail("timed out")


def final_weights(folder: Path) -> dict[str, torch.Tensor]:
    return torch.load(folder / ckpt.FINAL, weights_only=True)["network_weights"]


def assert_bitwise_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.fixture(scope="module")
def straight(env, tmp_path_factory) -> Path:
    """The uninterrupted deterministic run everything is compared with."""
    results = tmp_path_factory.mktemp("straight")
    begin = time.time()
    check(cli(results_env(env, results), *TRAIN, *SCHEDULE))
    print(f"straight run: {time.time() - begin:.1f} s")
    return fold(results)


def test_usr1_mid_epoch_stops_after_it_and_continue_is_bit_exact(env, straight, tmp_path):
    environment = results_env(env, tmp_path)
    out = tmp_path / "out.txt"
    process = start(environment, out)
    wait_for(lambda: 1 in started_epochs(out), process=process)
    k = max(started_epochs(out))
    process.send_signal(signal.SIGUSR1)
    assert process.wait(timeout=120) == EXIT_STOPPED
    text = out.read_text()
    assert (
        f"nnunet-core train: {DATASET} {CONFIG} fold 0: stopped at epoch {k} by SIGUSR1; "
        f"checkpoint_latest.pth holds epoch {k + 1}; exit {EXIT_STOPPED}: the retry continues "
        "with --c"
    ) in text
    latest = ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)
    assert latest["current_epoch"] == k + 1 < EPOCHS
    assert not (fold(tmp_path) / ckpt.FINAL).exists()
    result = check(cli(environment, *TRAIN, *SCHEDULE, "--c"))
    assert f"at epoch {k + 1}" in result.stdout
    assert_bitwise_equal(final_weights(fold(tmp_path)), final_weights(straight))


def test_sigkill_after_a_checkpoint_then_continue_is_bit_exact(env, straight, tmp_path):
    """SIGKILL once epoch k's checkpoint exists: ``--c`` keeps the history before epoch k, redoes
    nothing of it, marks the killed attempt in provenance and ends bitwise as the straight run."""
    environment = results_env(env, tmp_path)
    out = tmp_path / "out.txt"
    process = start(environment, out)
    wait_for(lambda: 2 in started_epochs(out), process=process)  # latest holds epoch 2
    process.kill()
    process.wait()
    killed_at = time.time()
    latest = fold(tmp_path) / ckpt.LATEST
    stopped = ckpt.load_checkpoint(latest)  # whatever the kill interrupted, this loads
    k = stopped["current_epoch"]
    assert 2 <= k < EPOCHS and not (fold(tmp_path) / ckpt.FINAL).exists()
    result = check(cli(environment, *TRAIN, *SCHEDULE, "--c"))
    assert f"continuing from {latest} at epoch {k}" in result.stdout
    history = torch.load(fold(tmp_path) / ckpt.FINAL, weights_only=True)["logging"]
    before = stopped["logging"]
    assert len(history["train_losses"]) == EPOCHS
    assert history["train_losses"][:k] == before["train_losses"][:k]  # kept, not retrained
    assert history["epoch_start_timestamps"][:k] == before["epoch_start_timestamps"][:k]
    assert min(history["epoch_start_timestamps"][k:]) > killed_at
    attempts = json.loads((fold(tmp_path) / "provenance.json").read_text())["attempts"]
    # the killed attempt never closed its record; the continued one marked it
    assert [(a["start_epoch"], a["status"]) for a in attempts] == [(0, "killed"), (k, "finished")]
    assert_bitwise_equal(final_weights(fold(tmp_path)), final_weights(straight))


PARENT = textwrap.dedent(
    """
    # A Snakemake-like parent: default USR1 disposition (dies), unless it does what the
    # workflow does; it runs a shell that does not exec the command (two commands).
    import subprocess, sys
    if sys.argv[1] == "ignore":
        from nnunet_core.cluster import stop_signal
        stop_signal.for_workflow_process()
    shell = subprocess.run(["bash", "-c", sys.argv[2]])
    print("parent alive, shell", shell.returncode, flush=True)
    """
)


def signal_a_workflow_like_group(environment: dict[str, str], out: Path, signum: int):
    """Train under PARENT (the workflow's role) and a shell; signal the whole group mid-epoch.

    Returns the parent (ended) and what it printed.
    """
    command = " ".join(
        [f"set -uo pipefail; {sys.executable} -m nnunet_core", *TRAIN, *SCHEDULE]
        + [f'>> {out} 2>&1; echo "shell alive, train exited $?"']
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, "ignore", command],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    out.touch()
    wait_for(lambda: 1 in started_epochs(out), process=parent)
    os.killpg(parent.pid, signum)  # as SLURM signals every process of the step
    stdout, _ = parent.communicate(timeout=120)
    return parent, stdout


def _catches(pid: int, number: int) -> bool:
    """Whether process ``pid`` has a handler for signal ``number`` (its SigCgt mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.MULTILINE).group(1), 16)
    return bool(caught >> (number - 1) & 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_signal_during_start_up_is_not_lost(env, tmp_path):
    """Under the workflow the trainer starts with the signal ignored (its shell's disposition):
    it must catch it before torch loads, seconds on a busy node in which SLURM's warning can
    come, and then stop at the first epoch boundary."""
    out = tmp_path / "out.txt"
    handle = open(out, "a")  # noqa: SIM115 - the child owns it
    process = subprocess.Popen(
        [sys.executable, "-m", "nnunet_core", *TRAIN, *SCHEDULE],
        env=results_env(env, tmp_path),
        stdout=handle,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGUSR1, signal.SIG_IGN),
    )
    wait_for(lambda: _catches(process.pid, signal.SIGUSR1), timeout=60, process=process)
    maps = Path(f"/proc/{process.pid}/maps").read_text()
    process.send_signal(signal.SIGUSR1)
    assert "libtorch" not in maps, "the handler came after torch had loaded"
    assert process.wait(timeout=120) == EXIT_STOPPED, out.read_text()[-3000:]
    assert f"{DATASET} {CONFIG} fold 0: stopped at epoch 0 by SIGUSR1" in out.read_text()
    assert ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)["current_epoch"] == 1


def test_usr1_to_the_process_group_reaches_only_the_trainer(env, tmp_path):
    environment = results_env(env, tmp_path)
    out = tmp_path / "out.txt"
    parent, stdout = signal_a_workflow_like_group(environment, out, signal.SIGUSR1)
    assert parent.returncode == 0
    assert stdout.splitlines() == [
        f"shell alive, train exited {EXIT_STOPPED}",
        "parent alive, shell 0",
    ]
    assert "by SIGUSR1" in out.read_text()
    assert ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)["current_epoch"] < EPOCHS
    # without the workflow's mechanism, the same parent dies of the signal
    control = subprocess.Popen(
        [sys.executable, "-c", PARENT, "default", "sleep 30; echo never"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(1.0)
    os.killpg(control.pid, signal.SIGUSR1)
    assert control.wait(timeout=30) == -signal.SIGUSR1


def test_usr2_as_the_stop_signal_setting_stops_the_trainer_and_spares_the_rest(env, tmp_path):
    """A site that reserves USR1 sets NNUNET_STOP_SIGNAL=USR2: every role follows the setting."""
    environment = {**results_env(env, tmp_path), "NNUNET_STOP_SIGNAL": "USR2"}
    out = tmp_path / "out.txt"
    parent, stdout = signal_a_workflow_like_group(environment, out, signal.SIGUSR2)
    assert parent.returncode == 0
    assert stdout.splitlines() == [
        f"shell alive, train exited {EXIT_STOPPED}",
        "parent alive, shell 0",
    ]
    text = out.read_text()
    assert "stop conditions: SIGUSR2 (stops at the next epoch boundary)" in text
    assert "by SIGUSR2" in text
    assert ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)["current_epoch"] < EPOCHS


def test_deadline_stops_cleanly_without_a_signal(env, tmp_path):
    """A deadline the next epoch would not meet stops the training after its epoch, as a signal
    does (checkpoint_latest, exit 75), and a continued run with one stops after one more epoch.
    (When an epoch would not fit is tested on a clock in test_stop_conditions.py.)"""
    environment = results_env(env, tmp_path)
    schedule = ["--epochs", "20", "--iterations", "8", "--val-iterations", "2"]
    args = ["train", "900", CONFIG, "0", "-device", "cpu", "--num-workers", "0"]
    # a margin longer than the time to the deadline: no epoch fits, whatever its length
    no_room = ["--deadline", "3600", "--stop-margin", "1e7"]
    result = check_stopped(cli(environment, *args, *schedule, *no_room))
    assert "stop conditions: SIGUSR1" in result.stdout and "deadline" in result.stdout
    assert "stopped at epoch 0 by deadline" in result.stdout
    assert f"{DATASET} {CONFIG} fold 0: stopped at epoch 0 by deadline" in result.stderr
    assert ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)["current_epoch"] == 1
    assert not (fold(tmp_path) / ckpt.FINAL).exists()
    result = check_stopped(cli(environment, *args, *schedule, "--c", *no_room))
    assert "stopped at epoch 1 by deadline" in result.stdout, result.stdout[-2000:]
    assert ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)["current_epoch"] == 2
    assert not (fold(tmp_path) / ckpt.FINAL).exists()


def test_a_second_job_on_the_same_fold_is_refused(env, tmp_path):
    environment = results_env(env, tmp_path)
    out = tmp_path / "out.txt"
    # a schedule long enough that the first job is still training when the second starts
    long_schedule = ["--epochs", "1000", "--iterations", "8", "--val-iterations", "2"]
    first = start(environment, out, schedule=long_schedule)
    try:
        wait_for(lambda: 0 in started_epochs(out), process=first)
        second = cli(environment, *TRAIN, *SCHEDULE, "--c")
        assert second.returncode == 3
        assert "already being trained by pid" in second.stderr
        assert str(first.pid) in second.stderr
    finally:
        first.kill()
        first.wait()


def test_kill_9_at_random_moments_never_loses_a_checkpoint(env, tmp_path):
    """6 kills, 3 of them while a checkpoint is being written; --c always continues.

    The random moments are few: on a loaded machine most land in the start-up, before any
    checkpoint; the during-write kills are the ones that test the atomic write."""
    environment = results_env(env, tmp_path)
    folder = fold(tmp_path)
    schedule = ["--epochs", "12", "--iterations", "3", "--val-iterations", "1", "--save-every", "1"]
    rng = random.Random(0)
    out = tmp_path / "out.txt"
    during_write = 0
    for attempt in range(6):
        out.write_text("")
        process = start(environment, out, "--c", schedule=schedule)
        if attempt % 2 == 1:  # wait for a temporary checkpoint file, then kill at once
            end = time.time() + 60
            while time.time() < end and process.poll() is None:
                if any(folder.glob(".checkpoint_*.partial")):
                    break
                time.sleep(0.001)  # a write takes longer; a spinning loop takes a core
            during_write += 1
        else:
            time.sleep(rng.uniform(2.0, 6.0))
        process.kill()
        process.wait()
        latest = folder / ckpt.LATEST
        if latest.exists():
            epoch = ckpt.load_checkpoint(latest)["current_epoch"]  # always loads
            begun = started_epochs(out)
            if begun:  # never more than save_every (1) epoch lost
                assert epoch >= max(begun), (attempt, epoch, begun)
    assert during_write >= 3
    check(cli(environment, *TRAIN, *schedule, "--c"))
    assert torch.load(folder / ckpt.FINAL, weights_only=True)["current_epoch"] == 12


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("target", ["one rank", "launcher"])
def test_usr1_under_ddp_stops_every_rank_after_the_same_epoch(env, tmp_path, target):
    """Signalled rank or launcher: every rank stops after the same epoch, one checkpoint_latest.
    A DDP fold continuing with ``--c`` from its checkpoint_latest is tested in
    test_fine_tuning_cli.py (``[ddp]``, the second command, after a deadline stop); a continue
    after a SIGUSR1 stop, above in one process."""
    environment = results_env(env, tmp_path)
    out = tmp_path / "out.txt"
    ddp = ["train", "900", CONFIG, "0", "-device", "cpu", "--num-workers", "0", "-num_gpus", "2"]
    handle = open(out, "a")  # noqa: SIM115
    process = subprocess.Popen(
        [sys.executable, "-m", "nnunet_core", *ddp, *SCHEDULE],
        env=environment,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    wait_for(lambda: 1 in started_epochs(out), process=process, timeout=180)
    workers = [
        p
        for p in _children(process.pid)
        if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()
    ]
    assert len(workers) == 2
    if target == "one rank":
        os.kill(max(workers), signal.SIGUSR1)  # typically rank 1
    else:
        os.kill(process.pid, signal.SIGUSR1)
    assert process.wait(timeout=180) == EXIT_STOPPED, out.read_text()[-3000:]
    stops = re.findall(r"stopped at epoch (\d+) by", out.read_text())
    assert len(set(stops)) == 1, out.read_text()[-3000:]
    # the launcher passes the ranks' code on; rank 0 alone prints the fold's stderr line
    assert out.read_text().count(f"nnunet-core train: {DATASET} {CONFIG} fold 0: stopped") == 1
    latest = ckpt.load_checkpoint(fold(tmp_path) / ckpt.LATEST)
    assert latest["current_epoch"] == int(stops[0]) + 1 < EPOCHS
    assert not (fold(tmp_path) / ckpt.FINAL).exists()
