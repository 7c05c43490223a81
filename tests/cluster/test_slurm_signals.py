"""Stopping and resuming training through the real SLURM chain.

sbatch -> the job's Snakemake (slurm-jobstep) -> srun step -> inner Snakemake -> bash ->
``nnunet-core train``, submitted with ``--profile`` = profiles/slurm adapted to the test
cluster. The module fixture starts two Snakemake runs at once on copies of a dataset prepared
locally (so they submit training jobs only), each training folds of 3d_fullres:

* run "signals", 30-minute jobs:
  - fold 0 gets ``scancel --signal=USR1 <job>`` (the step's processes only) while it trains;
  - fold 1 gets a plain ``scancel <job>`` (TERM, then KILL: what a node failure does to the
    training) once it has written checkpoint_latest.pth;
* run "walltime": fold 2, its first job with a walltime of 3 minutes and
  ``--signal=USR1@105``, too short for the schedule; the retry gets 30 minutes (``attempt``).

Each test checks one of the three. Every fold must end with checkpoint_final.pth, each retry a
new SLURM job that continues at the epoch where the previous one stopped.

The folds train with ``paced_trainer.py``'s PacedTrainer (named by path, as a user names their
own): nnU-Net's training whose steps first sleep, so that epochs have a known least length while
the node's cores stay free for the rest of the suite.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.paced_trainer import PACE_SECONDS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

USR1_FOLD, KILL_FOLD, WALLTIME_FOLD = 0, 1, 2
# The trainer, by path, and its class (which names the results folder).
TRAINER_CLASS = "PacedTrainer"
TRAINER = f"{Path(__file__).with_name('paced_trainer.py')}:{TRAINER_CLASS}"
# Per epoch: 6 training and 1 validation step, each at least PACE_SECONDS (0.5 s): epochs of
# 3.5 s at the least, 4-5 s on a 2-core machine, so that signals land mid-training.
ITERATIONS = 6
# SLURM sends the warning of `-t 3 --signal=USR1@105` at slurmctld's first 30-s tick from 45 s
# into the job, so 45-75 s in (@135 came 15-45 s in, @120 31-51 s). By 45 s the job's Snakemake
# ignores SIGUSR1 and the trainer handles it, on a busy node too: the trainer's first line comes
# 8-9 s in on a quiet node (13 s beside the signals run), its handler before torch loads. (With
# @135 a CI run beside the rest of the suite lost the warning: it came before the trainer, whose
# handler then followed torch, had started.) The walltime fold must still train, not in its last
# epoch, at 75 s even when it starts training 6 s in and every epoch is as fast as alone on one
# core. Only its first job is that short: with 3 minutes for every job, a third job, or the 30-s
# tick and the plugin's polling back-off, cost up to 2 more minutes.
WALLTIME_LIMIT = "3 if attempt == 1 else 30"  # minutes (resources are evaluated per attempt)
WALLTIME_SIGNAL = "--signal=USR1@105"
SIGNAL_BY, TRAINING_FROM = 75, 6  # seconds into the job, at the latest / at the earliest
# The walltime fold's epochs are planned with the measured epoch, but with no more than this
# many seconds: the least an epoch can take, its steps' sleep. Load that slowed the measurement
# may be gone when the fold trains (a CI run measured 13-19 s, then the fold finished its 4
# epochs before the warning came); a fold planned too long only makes its retry longer.
FASTEST_EPOCH = (ITERATIONS + 1) * PACE_SECONDS
RUN_TIMEOUT = 360  # seconds for each run (about 2 minutes expected), plus its training time
# `nnunet-core train`'s line when it exits 75 (EXIT_STOPPED), also in the fold's training log
STOPPED = re.compile(
    r"3d_fullres fold (\d): stopped at epoch (\d+) by (SIGUSR1|deadline); "
    r"checkpoint_latest\.pth holds epoch \d+; exit 75: the retry continues with --c"
)


@dataclass
class Run:
    workdir: Path
    returncode: int
    output: str  # the main Snakemake's stdout and stderr
    seconds: float


@dataclass
class Runs:
    signals: Run
    walltime: Run
    usr1_job: str  # the job of fold 0 that got SIGUSR1
    killed_job: str  # the job of fold 1 that was cancelled
    killed_at_epoch: int  # the epoch fold 1's checkpoint_latest.pth held after the kill
    epochs: int  # of folds 0 and 1
    walltime_epochs: int  # of fold 2


@pytest.fixture(scope="module")
def epoch_seconds(cluster, prepared_workdir, tmp_path_factory) -> float:
    """Seconds of one warmed-up training epoch here, alone on one core: the fastest of the
    last three of four epochs of a local ``nnunet-core train`` (its results in a scratch
    folder), so that a moment of load elsewhere does not count."""
    results = tmp_path_factory.mktemp("epoch_seconds")
    command = [
        str(Path(sys.executable).parent / "nnunet-core"),
        *("train", cluster.dataset, cluster.configuration, "4", "-tr", TRAINER),
        *("-device", "cpu", "--epochs", "4", "--iterations", str(ITERATIONS)),
        *("--val-iterations", "1", "--num-workers", "0", "--raw", "work/raw"),
        *("--preprocessed", "work/preprocessed", "--results", str(results)),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, cwd=prepared_workdir, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    logs = "".join(p.read_text() for p in results.rglob("training_log_*.txt"))
    seconds = [float(s) for s in re.findall(r"Epoch time: ([\d.]+) s", logs)]
    assert len(seconds) == 4, logs
    return min(seconds[1:])


def _checkpoint_epoch(path: Path) -> int:
    from nnunet_core.model.checkpoint import load_checkpoint

    return int(load_checkpoint(path)["current_epoch"])


def _start(
    cluster,
    prepared: Path,
    folder: Path,
    folds: list[int],
    epochs: int,
    timeout: float = RUN_TIMEOUT,
    **training,
):
    """A copy of the prepared run folder and snakemake started on it (targets: the folds),
    stopped after ``timeout`` seconds; ``training`` holds more config training.* keys,
    ``resources`` of the train rule and ``profile``: more profile keys."""
    resources = training.pop("resources", {})
    profile_keys = training.pop("profile", {})
    workdir = cluster.copy_prepared(prepared, folder / "run")
    config = cluster.tiny_config()
    config["training"].update(
        trainer=TRAINER,
        folds=folds,
        epochs=epochs,
        iterations_per_epoch=ITERATIONS,
        val_iterations_per_epoch=1,
        gpus_per_job=1,
        num_workers=0,
        threads=1,
        **{"save_every": 1, **training},
    )
    profile = cluster.profile(folder, set_resources={"train": resources}, **profile_keys)
    run = cluster.start(
        workdir,
        config,
        *("--profile", str(profile)),
        # Under SLURM `cores` caps the threads of all jobs in flight: every fold at once.
        *("--cores", str(len(folds))),
        *cluster.training_targets(workdir, folds, TRAINER_CLASS),
        timeout=timeout,
    )
    return workdir, run


@pytest.fixture(scope="module")
def runs(cluster, prepared_workdir, epoch_seconds, tmp_path_factory) -> Runs:
    # Folds 0 and 1: 4 epochs, or more where they would take less than 14 s.
    epochs = max(4, math.ceil(14 / epoch_seconds))
    # Fold 2: at the fastest, in a non-last epoch when the signal comes at SIGNAL_BY. Its retry
    # may train almost all of them, at the measured pace.
    fastest = min(epoch_seconds, FASTEST_EPOCH)
    walltime_epochs = int((SIGNAL_BY - TRAINING_FROM) // fastest) + 2
    print(f"epoch: {epoch_seconds:.2f} s alone; epochs {epochs}, walltime fold {walltime_epochs}")

    def timeout(fold_epochs: int) -> float:
        """Each fold trains on its own core, all its epochs over its attempts and at most one
        again (the epoch a kill cut short), at the measured pace: on a loaded machine slowly."""
        return RUN_TIMEOUT + (fold_epochs + 1) * epoch_seconds

    started = []
    try:
        # The walltime run first: it takes longest.
        walltime_dir, walltime = _start(
            cluster,
            prepared_workdir,
            tmp_path_factory.mktemp("walltime"),
            [WALLTIME_FOLD],
            walltime_epochs,
            timeout(walltime_epochs),
            stop_margin=5,  # the deadline check must leave the stop to the walltime signal
            # No periodic checkpoint: the one the stop writes is what the retry continues from.
            save_every=walltime_epochs,
            retries=2,
            # Strings are Python expressions (hence repr for the extra sbatch flags).
            resources={"runtime": WALLTIME_LIMIT, "slurm_extra": repr(WALLTIME_SIGNAL)},
            # Status polls at 6, 22, 48, 84, 130 s (each round without a finished job waits 10 s
            # longer): the first job ends 50-85 s in, whenever slurmctld's tick comes, and the
            # retry is seen at 84 or 130 s. (With the first poll at 2 s: at 110 s or at 162 s.)
            profile={"slurm-init-seconds-before-status-checks": 6},
        )
        started.append((walltime_dir, walltime))
        workdir, run = _start(
            cluster,
            prepared_workdir,
            tmp_path_factory.mktemp("signals"),
            [USR1_FOLD, KILL_FOLD],
            epochs,
            timeout(epochs),
            retries=2,
        )
        started.append((workdir, run))
        hit: dict[int, str] = {}
        killed_at_epoch: list[int] = []
        configuration = cluster.configuration

        def hit_when_ready() -> bool:
            if USR1_FOLD not in hit:
                job = cluster.running_job(workdir, "train", configuration, USR1_FOLD)
                log = cluster.read(cluster.train_log(workdir, USR1_FOLD))
                if job and re.search(r": Epoch 1$", log, re.MULTILINE):  # past epoch 0
                    cluster.scancel("--signal=USR1", job.id)  # the steps only: no --full, no -b
                    hit[USR1_FOLD] = job.id
            latest = cluster.fold_dir(workdir, KILL_FOLD, TRAINER_CLASS) / "checkpoint_latest.pth"
            if KILL_FOLD not in hit:
                job = cluster.running_job(workdir, "train", configuration, KILL_FOLD)
                if job and latest.is_file():
                    cluster.scancel(job.id)
                    hit[KILL_FOLD] = job.id
            elif not killed_at_epoch:
                last = cluster.jobs_of(workdir, "train", configuration, KILL_FOLD)[-1]
                if last.id == hit[KILL_FOLD] and last.ended:
                    # The job's processes are gone and its retry is not submitted yet.
                    killed_at_epoch.append(_checkpoint_epoch(latest))
            return len(hit) == 2 and bool(killed_at_epoch)

        cluster.wait_for(
            hit_when_ready,
            360,  # 2-3 min on a quiet 2-core node; twice that when another process loads it
            "folds 0 and 1 to train (to signal and to kill them)",
            alive=run.alive,
            details=lambda: f"squeue:\n{cluster.table(workdir)}\nsnakemake:\n{run.tail()}",
        )
        cluster.wait_for(
            lambda: not any([process.alive() for _, process in started]),  # notes each end
            max(timeout(epochs), timeout(walltime_epochs)) + 90,
            "both runs to end",
            interval=1,
        )
        results = {}
        for folder, process in started:
            process.wait()
            print(f"{folder}: {process.seconds:.0f} s; jobs:\n{cluster.table(folder)}")
            results[folder] = Run(folder, process.returncode, process.output, process.seconds)
    finally:
        for folder, process in started:
            process.stop()
            cluster.cancel_leftovers(folder)
    return Runs(
        signals=results[workdir],
        walltime=results[walltime_dir],
        usr1_job=hit[USR1_FOLD],
        killed_job=hit[KILL_FOLD],
        killed_at_epoch=killed_at_epoch[0],
        epochs=epochs,
        walltime_epochs=walltime_epochs,
    )


# ----------------------------------------------------------------------------- helpers
def _attempts(cluster, run: Run, fold: int) -> list[dict]:
    """provenance.json's attempts: slurm_job_id, start_epoch, end_epoch, status per attempt."""
    path = cluster.fold_dir(run.workdir, fold, TRAINER_CLASS) / "provenance.json"
    return json.loads(path.read_text())["attempts"]


def _summary(attempts: list[dict]) -> list[tuple]:
    keys = ("slurm_job_id", "start_epoch", "end_epoch", "status")
    return [tuple(attempt[k] for k in keys) for attempt in attempts]


def _job_log(cluster, run: Run, job, fold: int) -> str:
    return cluster.read(cluster.slurm_log(run.workdir, "train", job, cluster.configuration, fold))


def _first_training_log(cluster, run: Run, fold: int) -> str:
    """The fold's training log of its first attempt (the rule's log is replaced at a retry)."""
    folder = cluster.fold_dir(run.workdir, fold, TRAINER_CLASS)
    return sorted(folder.glob("training_log_*.txt"))[0].read_text()


def _resumed_epoch(cluster, run: Run, fold: int) -> int:
    """The epoch the last attempt continued with, from the fold's rule log (that attempt's)."""
    log = cluster.read(cluster.train_log(run.workdir, fold))
    match = re.search(r"continuing from \S+/fold_\d/checkpoint_latest\.pth at epoch (\d+)", log)
    assert match, f"the last attempt of fold {fold} did not continue from checkpoint_latest:\n{log}"
    return int(match.group(1))


def _assert_step_survived(log: str) -> None:
    """The step's task (the inner Snakemake) ended by itself after reporting the rule's exit 75;
    a Snakemake killed by SIGUSR1 shows as srun's "User defined signal 1" instead."""
    assert "returned non-zero exit status 75" in log, log[-4000:]
    assert re.search(r"srun: error: \S+: task 0: Exited with exit code 1\b", log), log[-4000:]
    assert "User defined signal" not in log, log[-4000:]


def _assert_finished(cluster, run: Run, folds: list[int]) -> None:
    assert run.returncode == 0, run.output[-6000:]
    for fold in folds:
        folder = cluster.fold_dir(run.workdir, fold, TRAINER_CLASS)
        assert (folder / "checkpoint_final.pth").is_file(), fold
        assert (folder / "validation" / "summary.json").is_file(), fold
        assert not (folder / "checkpoint_latest.pth").exists(), fold  # removed once finished
    # The dataset was prepared locally: the run submitted training jobs only.
    submitted = re.findall(r"sbatch call: .* --comment (\S+)", run.output)
    assert submitted, run.output[-6000:]
    assert {c.rsplit("_", 1)[0] for c in submitted} == {"rule_train_wildcards_3d_fullres"}
    states = {job.id: job.state for job in cluster.jobs(run.workdir)}
    assert "TIMEOUT" not in states.values(), states


# ----------------------------------------------------------------------------- tests
def test_both_runs_finish_every_fold_without_a_timeout(runs, cluster):
    _assert_finished(cluster, runs.signals, [USR1_FOLD, KILL_FOLD])
    _assert_finished(cluster, runs.walltime, [WALLTIME_FOLD])


def test_usr1_via_scancel_stops_the_epoch_and_the_retry_continues(runs, cluster):
    run, fold, first = runs.signals, USR1_FOLD, runs.usr1_job
    jobs = cluster.jobs_of(run.workdir, "train", cluster.configuration, fold)
    assert [(j.id, j.state) for j in jobs][:1] == [(first, "FAILED")], jobs
    assert [j.state for j in jobs] == ["FAILED", "COMPLETED"], jobs
    log = _job_log(cluster, run, jobs[0], fold)
    # Written by the trainer after it had finished its epoch and saved; then it exited 75.
    training_log = _first_training_log(cluster, run, fold)
    stop = STOPPED.search(training_log)
    assert stop, training_log[-4000:]
    assert stop.group(3) == "SIGUSR1"
    epoch = int(stop.group(2))
    assert epoch >= 1  # signalled once its log showed epoch 1
    _assert_step_survived(log)
    assert f"SLURM-job '{first}' failed, SLURM status is: 'FAILED'" in run.output
    # The retry, a new SLURM job, continued with the epoch after the one the signal ended.
    assert _summary(_attempts(cluster, run, fold)) == [
        (first, 0, epoch + 1, "stopped"),
        (jobs[1].id, epoch + 1, runs.epochs, "finished"),
    ]
    assert _resumed_epoch(cluster, run, fold) == epoch + 1


def test_walltime_signal_stops_before_the_limit_and_the_retry_finishes(runs, cluster):
    run, fold = runs.walltime, WALLTIME_FOLD
    jobs = cluster.jobs_of(run.workdir, "train", cluster.configuration, fold)
    if [j.state for j in jobs] != ["FAILED", "COMPLETED"]:
        fields = cluster.fields(jobs[0].id)
        pytest.fail(
            f"not two segments: {jobs}; the first started {fields.get('StartTime')}, its training "
            f"log:\n{_first_training_log(cluster, run, fold)[:3000]}"
        )
    submits = re.findall(r"sbatch call: (.*)", run.output)
    assert len(submits) == 2, submits
    assert " -t 3 " in submits[0] and f" {WALLTIME_SIGNAL} " in submits[0], submits[0]
    assert " -t 30 " in submits[1], submits[1]
    first = cluster.fields(jobs[0].id)
    # It stopped by itself, in time: FAILED (exit 75 on purpose), not TIMEOUT, its run time
    # short of the limit.
    assert first["JobState"] == "FAILED" and first["TimeLimit"] == "00:03:00", first
    assert cluster.seconds(first["RunTime"]) < 180, first["RunTime"]
    log = _job_log(cluster, run, jobs[0], fold)
    training_log = _first_training_log(cluster, run, fold)
    stop = STOPPED.search(training_log)
    assert stop, training_log[-4000:]
    _assert_step_survived(log)
    epoch = int(stop.group(2))
    # The retry, a new SLURM job, continued with the next epoch and finished.
    assert _summary(_attempts(cluster, run, fold)) == [
        (jobs[0].id, 0, epoch + 1, "stopped"),
        (jobs[1].id, epoch + 1, runs.walltime_epochs, "finished"),
    ]
    assert _resumed_epoch(cluster, run, fold) == epoch + 1
    print(f"walltime job {jobs[0].id}: stopped at epoch {epoch} by {stop.group(3)}")


def test_killed_job_retry_continues_from_the_latest_checkpoint(runs, cluster):
    run, fold, killed = runs.signals, KILL_FOLD, runs.killed_job
    jobs = cluster.jobs_of(run.workdir, "train", cluster.configuration, fold)
    assert [(j.id, j.state) for j in jobs][:1] == [(killed, "CANCELLED")], jobs
    assert [j.state for j in jobs] == ["CANCELLED", "COMPLETED"], jobs
    assert f"SLURM-job '{killed}' failed, SLURM status is: 'CANCELLED'" in run.output
    epoch = runs.killed_at_epoch
    assert epoch >= 1
    # The killed attempt never closed its record (the retry marked it); no saved epoch was lost.
    assert _summary(_attempts(cluster, run, fold)) == [
        (killed, 0, None, "killed"),
        (jobs[1].id, epoch, runs.epochs, "finished"),
    ]
    assert _resumed_epoch(cluster, run, fold) == epoch
