"""What a person follows a real workflow run with: one console line per job, `nnunet-core status`
(each fold's epoch, ETA, pseudo Dice and state; each prediction job's case i/N) while it runs and
after, and torch threads that follow `--cores`.

One tiny run (3d_fullres, folds 0 and 1, the default `training.threads`), in two invocations:
the first is stopped in fold 0 by SIGUSR1 (retries 0: the fold stays "stopped") while fold 1
fails on a corrupt checkpoint of its own; the second, after the user deleted it, continues
fold 0 from its checkpoint and runs to the test prediction.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from nnunet_core.layout.predictions import configuration_predictions_dir
from nnunet_core.workflow.status import work_status
from tests.helpers.workflow import (
    DATASET,
    REPO,
    copy_prepared,
    prepared_config,
    processes,
    trainer_of_fold,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
SEEN = dict[str, set[str]]  # job -> the status lines seen while the workflow ran


def start(root: Path, *targets: str) -> tuple[subprocess.Popen, Path]:
    """The real snakemake CLI with the default profile, --cores 2, its console into a file."""
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile", str(REPO / "Snakefile"), "--directory", str(root),
        "--configfile", str(root / "config.yaml"), "--cores", "2", *targets,
    ]  # fmt: skip
    console = root / f"console_{len(list(root.glob('console_*')))}.txt"
    with open(console, "w") as handle:
        run = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=root)
    return run, console


def watch(run: subprocess.Popen, work: Path, seen: SEEN, act: Callable[[], bool]) -> None:
    """Read the status as a person would while the run goes on; ``act`` is polled until it
    returns True (it acts on the run once)."""
    acted = False
    end = time.time() + 600
    while run.poll() is None and time.time() < end:
        for jobs in work_status(work).values():
            for job in jobs:
                seen.setdefault(job.job, set()).add(job.line())
        acted = acted or act()
        time.sleep(0.2)
    run.wait(timeout=60)


def status(work: Path) -> str:
    """`nnunet-core status WORK_DIR` as a person types it."""
    done = subprocess.run(
        [sys.executable, "-m", "nnunet_core", "status", str(work)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def line_of(text: str, job: str) -> str:
    found = [line.strip() for line in text.splitlines() if line.strip().startswith(job + "  ")]
    assert len(found) == 1, text
    return found[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path) -> dict:
    root = tmp_path_factory.mktemp("status")
    work = copy_prepared(prepared_work, root / "work")
    config = prepared_config(work)
    config["training"].update(
        folds=[0, 1], epochs=3, iterations_per_epoch=2, val_iterations_per_epoch=1, retries=0
    )
    config["training"]["threads"] = None  # the default: all of --cores for a CPU job
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    corrupt = work / "results" / DATASET / MODEL / "fold_1" / "checkpoint_latest.pth"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"not a checkpoint")
    fold0_log = work / "logs" / DATASET / "train_3d_fullres_fold0.log"

    first, first_console = start(root, "trained", "--keep-going")
    seen_first: SEEN = {}

    def stop_fold_0() -> bool:
        if not (fold0_log.is_file() and ": Epoch 1" in fold0_log.read_text()):
            return False
        trainer = trainer_of_fold(DATASET, "0", first.pid)
        if trainer is None:
            return False
        for pid in (trainer, processes()[trainer][0], first.pid):  # as SLURM signals a step
            os.kill(pid, signal.SIGUSR1)
        return True

    watch(first, work, seen_first, stop_fold_0)
    assert first.returncode != 0, first_console.read_text()[-3000:]
    after_first = status(work)
    first_logs = {f: (fold0_log.parent / f"train_3d_fullres_fold{f}.log").read_text() for f in "01"}

    corrupt.unlink()  # what the failed fold's one line tells the user to do
    # up to the test prediction (postprocessing, evaluation and the report add nothing here)
    prediction = configuration_predictions_dir(work / "predictions" / DATASET, "3d_fullres")
    second, second_console = start(root, str(prediction))
    seen_second: SEEN = {}
    watch(second, work, seen_second, lambda: True)
    assert second.returncode == 0, second_console.read_text()[-3000:]
    return {
        "work": work,
        "seen_first": seen_first,
        "after_first": after_first,
        "first_logs": first_logs,
        "seen_second": seen_second,
        "console": second_console.read_text(),
        "after_second": status(work),
        "predict_log": (fold0_log.parent / "predict_3d_fullres.log").read_text(),
        "fold1_log": (fold0_log.parent / "train_3d_fullres_fold1.log").read_text(),
        "snakemake_logs": "".join(
            log.read_text() for log in (root / ".snakemake" / "log").glob("*.snakemake.log")
        ),
    }


def test_a_running_fold_shows_its_epoch_eta_and_pseudo_dice(runs: dict) -> None:
    running = [
        line for line in runs["seen_first"]["train 3d_fullres fold 0"] if "  running  ETA " in line
    ]
    assert any(
        re.search(r"epoch [12]/3  running  ETA \d+:\d\d:\d\d \(about [^)]+\)  pseudo Dice \[", line)
        for line in running
    ), runs["seen_first"]


def test_a_fold_stopped_by_the_signal_says_so(runs: dict) -> None:
    line = line_of(runs["after_first"], "train 3d_fullres fold 0")
    assert re.search(
        r"  epoch [23]/3  stopped  pseudo Dice \[[^]]+\]  stopped at epoch \d+ by SIGUSR1; "
        r"the same command continues it from its checkpoint \(so does its retry, if one is "
        r"left\)$",
        line,
    ), line


def test_a_failed_fold_shows_the_logs_last_line(runs: dict) -> None:
    line = line_of(runs["after_first"], "train 3d_fullres fold 1")
    assert re.search(
        r"  failed  nnunet-core train: error: \S+checkpoint_latest\.pth: corrupted or not a "
        r"checkpoint .*delete it",
        line,
    ), line


def test_the_retry_of_a_stopped_fold_shows_continuing(runs: dict) -> None:
    lines = runs["seen_second"]["train 3d_fullres fold 0"]
    assert any(
        re.search(r"  continuing  .*attempt 2, after attempt 1 stopped after \d epoch", line)
        for line in lines
    ), lines


def test_after_the_run_every_job_is_done(runs: dict) -> None:
    text = runs["after_second"]
    assert text.splitlines()[0] == f"{runs['work'] / 'logs' / DATASET}:", text
    for fold in "01":
        line = line_of(text, f"train 3d_fullres fold {fold}")
        assert re.search(r"  epoch 3/3  done  pseudo Dice \[[^]]+\]$", line), line
    assert line_of(text, "predict 3d_fullres") == "predict 3d_fullres  case 2/2  done"


def test_cpu_jobs_have_torch_threads_of_all_cores(runs: dict) -> None:
    """--cores 2, training.threads null: each fold and prediction job computes on 2 threads."""
    assert "device cpu, 2 torch threads" in runs["first_logs"]["0"]
    assert "device cpu, 2 torch threads" in runs["fold1_log"]
    assert "on cpu, 2 torch threads" in runs["predict_log"]


def test_the_console_prints_one_short_line_per_job(runs: dict) -> None:
    console = runs["console"]
    assert re.search(
        r"^Job \d+: train configuration=3d_fullres,fold=0, log: \S+train_3d_fullres_fold0\.log$",
        console,
        re.M,
    ), console
    assert re.search(r"^Job \d+: select, log: ", console, re.M), console
    assert "    input: " not in console and "Shell command" not in console
    # Snakemake's header echoes the user's own command line (as long as its paths): not a job's
    job_lines = [line for line in console.splitlines() if not line.startswith("  Command: ")]
    assert max(len(line) for line in job_lines) < 300, console
    # the blocks, reasons and commands stay in Snakemake's own log, to rerun a step by hand
    logs = runs["snakemake_logs"]
    assert re.search(r"^Shell command: (.*\n){0,3}.*nnunet-core predict -i ", logs, re.M), logs
