"""`nnunet-core status` through every phase of a real fold: training (epoch i/N), final validation
(case i/N with npz, its ETA), the metrics, done, stopped, failed during validation, and a fold
whose training an earlier attempt did (reused).

The folds train in this process (the real ``run_fold`` on the tiny dataset, as the workflow's
job runs it: ``--c --npz``) with their stdout going, line by line, into a job log laid out as the
workflow's ``work_dir/logs``; after each line the status is read from the work folder as a person
reading it at that moment would, so every state below is one the real run went through.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
import torch

from nnunet_core import cli
from nnunet_core.cluster.exit_codes import EXIT_STOPPED, EXIT_USAGE
from nnunet_core.layout.work import TRAIN_LOG, WORK_LOGS, WORK_RESULTS
from nnunet_core.workflow.status import work_status
from tests.helpers.training import CONFIG, DATASET

pytestmark = pytest.mark.slow

TRAINER = "nnUNetTrainerNoMirroring"  # a validation case is one sliding window, not eight
STOP_AFTER_FIRST_EPOCH = ("--deadline", "3600", "--stop-margin", "1e7")
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d"
ETA = rf"ETA \d+:\d\d:\d\d \(about {STAMP}\)"


class JobLog(io.TextIOBase):
    """The fold job's stdout: each line appended to its log, then the fold's status line read
    (``seen``: ``(log line, status line)``); ``on_line`` may act on the run at a line."""

    def __init__(self, work: Path, fold: str, on_line: Callable[[str], None] | None = None):
        self.work, self.fold, self.on_line = work, fold, on_line
        self.path = work / WORK_LOGS / DATASET / TRAIN_LOG.format(configuration=CONFIG, fold=fold)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.seen: list[tuple[str, str]] = []
        self._partial = ""

    def write(self, text: str) -> int:
        with self.path.open("a") as handle:
            handle.write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self.seen.append((line, fold_line(self.work, self.fold)))
            if self.on_line is not None:
                self.on_line(line)
        return len(text)

    def at(self, pattern: str) -> str:
        """The status line read right after the first log line matching ``pattern``."""
        found = [status for line, status in self.seen if re.search(pattern, line)]
        assert found, [line for line, _ in self.seen]
        return found[0]


def fold_line(work: Path, fold: str) -> str:
    lines = [
        job.line()
        for jobs in work_status(work).values()
        for job in jobs
        if job.job == f"train {CONFIG} fold {fold}"
    ]
    assert len(lines) == 1, lines
    return lines[0]


def train(env: dict[str, str], work: Path, job_log: JobLog, *flags: str) -> int:
    """One attempt of the fold's job: the real command (``--c --npz``, as the workflow's), in
    this process on one CPU thread, its stdout and stderr into the job log (as the rule's
    ``>> log 2>&1``); returns its exit status."""
    command = [
        "train", DATASET, CONFIG, job_log.fold, "-tr", TRAINER, "--c", "--npz", "-device", "cpu",
        "--epochs", "2", "--iterations", "1", "--val-iterations", "1", "--num-workers", "0",
        "--raw", env["nnUNet_raw"], "--preprocessed", env["nnUNet_preprocessed"],
        "--results", str(work / WORK_RESULTS), *flags,
    ]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(job_log), contextlib.redirect_stderr(job_log):
            return cli.main(command)
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def runs(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    work = tmp_path_factory.mktemp("status_phases") / "work"
    (work / WORK_RESULTS).mkdir(parents=True)
    # fold 'all' validates all six cases: case i/N with cases before and after it
    first = JobLog(work, "all")
    assert train(env, work, first) == 0
    done = fold_line(work, "all")
    # the same command once more (appending to the job's log): nothing is left to train
    again = JobLog(work, "all")
    assert train(env, work, again) == 0

    # fold 0: stopped after its first epoch; the same command continues, and its validation
    # fails at its second case (that case's preprocessed data went missing)
    stopped = JobLog(work, "0")
    assert train(env, work, stopped, *STOP_AFTER_FIRST_EPOCH) == EXIT_STOPPED
    after_stop = fold_line(work, "0")
    splits = json.loads(
        (Path(env["nnUNet_preprocessed"]) / DATASET / "splits_final.json").read_text()
    )
    second = splits[0]["val"][1]
    data = next((Path(env["nnUNet_preprocessed"]) / DATASET).glob(f"*/{second}.b2nd"))
    aside = data.with_name(data.name + ".aside")

    def lose_second_case(line: str) -> None:
        if re.search(r": validation: case 1/2 ", line):
            data.rename(aside)

    failing = JobLog(work, "0", lose_second_case)
    try:
        failed = train(env, work, failing)
    finally:
        if aside.exists():
            aside.rename(data)
    assert failed == EXIT_USAGE, failing.path.read_text()[-2000:]
    fold_all = work / WORK_RESULTS / DATASET / f"{TRAINER}__nnUNetPlans__{CONFIG}" / "fold_all"
    return {
        "first": first,
        "done": done,
        "again": again,
        "after_again": fold_line(work, "all"),
        "attempts": json.loads((fold_all / "provenance.json").read_text())["attempts"],
        "after_stop": after_stop,
        "failing": failing,
        "after_failure": fold_line(work, "0"),
        "error_line": failing.path.read_text().splitlines()[-1],
    }


def test_training_shows_the_epoch_and_its_eta(runs: dict) -> None:
    line = runs["first"].at(r": epoch 1/2: ")
    assert re.fullmatch(
        rf"train {CONFIG} fold all  epoch 1/2  running  {ETA}  pseudo Dice \[.*\]  log written .*",
        line,
    ), line


def test_final_validation_shows_case_i_of_n_with_npz_and_an_eta(runs: dict) -> None:
    first = runs["first"]
    assert re.fullmatch(
        rf"train {CONFIG} fold all  validation case 0/6 \(with npz\)  running  pseudo Dice "
        r"\[.*\]  log written .*",
        first.at(r": training finished after 2 epochs$"),
    ), first.at(r": training finished after 2 epochs$")
    line = first.at(r": validation: case 3/6 ")
    assert re.fullmatch(
        rf"train {CONFIG} fold all  validation case 3/6 \(with npz\)  running  {ETA}  "
        r"pseudo Dice \[.*\]  log written .*",
        line,
    ), line
    metrics = first.at(r": validation: case 6/6 ")
    assert re.fullmatch(
        rf"train {CONFIG} fold all  validation 6/6 cases done, computing the metrics  running  "
        r"pseudo Dice \[.*\]  log written .*",
        metrics,
    ), metrics


def test_a_finished_fold_is_done(runs: dict) -> None:
    assert re.fullmatch(
        rf"train {CONFIG} fold all  epoch 2/2  done  pseudo Dice \[.*\]", runs["done"]
    )


def test_a_fold_whose_training_was_reused_says_so(runs: dict) -> None:
    attempts = runs["attempts"]
    assert [(a["start_epoch"], a["end_epoch"]) for a in attempts] == [(0, 2), (2, 2)]
    assert attempts[1]["start_weights"]["path"].endswith("checkpoint_final.pth")
    trained = f"{datetime.fromisoformat(attempts[0]['end']):%Y-%m-%d %H:%M}"
    reused = f"training reused from an earlier attempt, {trained}"
    assert not any(re.search(r": epoch \d/2: ", line) for line, _ in runs["again"].seen)
    during = runs["again"].at(r": validation: case 3/6 ")
    assert during.startswith(f"train {CONFIG} fold all  validation case 3/6 (with npz)  "), during
    assert f"  {reused}; attempt 2, after attempt 1 finished after 2 epoch(s)" in during, during
    assert runs["after_again"] == (
        f"train {CONFIG} fold all  epoch 2/2  done  "
        + re.search(r"pseudo Dice \[.*?\]", runs["after_again"]).group(0)
        + f"  {reused}"
    ), runs["after_again"]
    assert "reused" not in runs["done"]


def test_a_stopped_fold_says_by_what_where_and_that_the_same_command_continues(
    runs: dict,
) -> None:
    assert re.fullmatch(
        rf"train {CONFIG} fold 0  epoch 1/2  stopped  pseudo Dice \[.*\]  stopped at epoch 0 by "
        r"deadline; the same command continues it from its checkpoint \(so does its retry, if "
        r"one is left\)",
        runs["after_stop"],
    ), runs["after_stop"]


def test_a_fold_that_failed_in_validation_shows_the_case_and_the_error(runs: dict) -> None:
    error = runs["error_line"]
    assert error.startswith("nnunet-core train: error: ") and "synth_" in error, error
    assert runs["after_failure"] == (
        f"train {CONFIG} fold 0  validation case 1/2 (with npz)  failed  "
        + re.search(r"pseudo Dice \[.*?\]", runs["after_failure"]).group(0)
        + f"  {error}"
    ), runs["after_failure"]
    continuing = runs["failing"].at(r": epoch 2/2: ")
    assert "  epoch 2/2  continuing  " in continuing, continuing
