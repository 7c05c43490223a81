"""A fold's phase in `nnunet-core status` from the lines its job writes (in the trainer's exact
formats): the validation ETA's arithmetic, cases a retry kept, the metrics step, the start of an
attempt, a reused training told by provenance alone, and the kept logs of earlier attempts
(``<log>.1``) read before the current one. tests/integration/test_status_phases.py goes through
the same phases with a real fold."""

from __future__ import annotations

import json
from pathlib import Path

from nnunet_core.workflow.fold_phase import reused_detail, validation_phase, writes_npz
from nnunet_core.workflow.status import CONTINUING, FAILED, RUNNING, fold_status, run_status

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
START = (
    "2026-12-06 10:00:00: nnUNetTrainer 3d_fullres fold 0 on cpu: 4 training / 4 validation cases"
)
SCHEDULE = (
    "2026-12-06 10:00:01: patch [8, 8, 8], batch 2, spacing [1.0, 1.0, 1.0], 1,234 parameters; "
    "5 epochs x 2 iterations (+1 val)"
)
FRESH = "2026-12-06 10:00:00: no checkpoint in /w/fold_0 to continue from; starting fresh"
LAST_EPOCH = "2026-12-06 10:05:00: epoch 5/5: 60.00 s; all epochs done"
FINISHED = "2026-12-06 10:05:00: training finished after 5 epochs"


def case(i: int, stamp: str, kept: bool = False) -> str:
    tail = "kept from the last attempt" if kept else "9.0 s, shape [20, 20, 20]"
    return f"2026-12-06 {stamp}: validation: case {i}/4 (c_{i}) {tail}"


def test_the_validation_eta_is_the_remaining_cases_at_the_rate_so_far() -> None:
    lines = [FRESH, LAST_EPOCH, FINISHED, case(1, "10:05:10"), case(2, "10:05:20")]
    assert validation_phase(lines, npz=True) == (
        "validation case 2/4 (with npz)",
        "0:00:20 (about 2026-12-06 10:05)",
    )
    assert validation_phase([*lines, case(3, "10:05:50")], npz=False) == (
        "validation case 3/4",
        "0:00:17 (about 2026-12-06 10:06)",  # 50 s for 3 cases: 16.7 s for the last
    )


def test_cases_a_retry_kept_count_as_done_but_not_in_the_rate() -> None:
    reused = "2026-12-06 11:00:00: training already finished (5 epochs)"
    kept = [case(1, "11:00:00", kept=True), case(2, "11:00:00", kept=True)]
    assert validation_phase([reused, *kept], npz=False) == ("validation case 2/4", "")
    assert validation_phase([reused, *kept, case(3, "11:00:30")], npz=False) == (
        "validation case 3/4",
        "0:00:30 (about 2026-12-06 11:01)",
    )


def test_before_the_first_case_and_after_the_last() -> None:
    assert validation_phase([START, FRESH, LAST_EPOCH], npz=True) is None  # still training
    assert validation_phase([START, FRESH, LAST_EPOCH, FINISHED], npz=True) == (
        "validation case 0/4 (with npz)",
        "",
    )
    cases = [case(i, f"10:05:{10 * i}") for i in range(1, 5)]
    assert validation_phase([FINISHED, *cases], npz=True) == (
        "validation 4/4 cases done, computing the metrics",
        "",
    )


def test_npz_is_read_from_the_commands_arguments_else_its_command_line() -> None:
    assert writes_npz({"config": {"arguments": {"npz": True}}})
    assert not writes_npz(
        {"config": {"arguments": {"npz": False}}, "attempts": [{"argv": ["--npz"]}]}
    )
    assert writes_npz({"attempts": [{"argv": ["nnunet-core", "train", "--npz"]}]})
    assert not writes_npz({"attempts": [{"argv": ["nnunet-core", "train"]}]})
    assert not writes_npz({})


def attempt(start: int, end: int | None, path: str, ended: str | None) -> dict:
    weights = {"from": "checkpoint", "path": path, "epoch": start} if path else {"from": "fresh"}
    return {"start_epoch": start, "end_epoch": end, "start_weights": weights, "end": ended}


def test_a_reused_training_is_told_by_provenance_alone_and_dated_by_the_attempt_that_trained() -> (
    None
):
    trained = attempt(0, 5, "", "2026-12-06T10:05:30+01:00")
    reused = attempt(5, 5, "/w/fold_0/checkpoint_final.pth", "2026-12-07T09:00:00+01:00")
    assert reused_detail([], [trained, reused]) == (
        "training reused from an earlier attempt, 2026-12-06 10:05"
    )
    assert reused_detail([], [trained]) == ""
    # continued from checkpoint_latest and trained: not reused
    assert (
        reused_detail([], [trained, attempt(3, 5, "/w/fold_0/checkpoint_latest.pth", None)]) == ""
    )
    # the log says it before provenance closed the attempt; no record of when it was trained
    assert reused_detail(["2026-12-07 09:00:00: training already finished (5 epochs)"], []) == (
        "training reused from an earlier attempt"
    )


def work(tmp_path: Path, provenance: dict | None = None) -> tuple[Path, Path]:
    logs = tmp_path / "logs"
    logs.mkdir()
    results = tmp_path / "results"
    fold = results / MODEL / "fold_0"
    fold.mkdir(parents=True)
    if provenance is not None:
        (fold / "provenance.json").write_text(json.dumps(provenance))
    return logs / "train_3d_fullres_fold0.log", results


def test_an_attempts_first_epoch_shows_how_many_epochs_are_done(tmp_path: Path) -> None:
    log, results = work(tmp_path)
    log.write_text("\n".join([FRESH, START, SCHEDULE]) + "\n")
    assert fold_status(log, "3d_fullres", "0", results).progress == "epoch 0/5"
    continued = "2026-12-06 12:00:00: continuing from /w/fold_0/checkpoint_latest.pth at epoch 3"
    log.write_text("\n".join([continued, START, SCHEDULE]) + "\n")
    assert fold_status(log, "3d_fullres", "0", results).progress == "epoch 3/5"


def test_a_failure_in_validation_keeps_its_case(tmp_path: Path) -> None:
    log, results = work(tmp_path, {"config": {"arguments": {"npz": True}}, "attempts": []})
    error = "nnunet_core.errors.DatasetError: /p/c_3.b2nd: preprocessed array not found"
    lines = [FRESH, LAST_EPOCH, FINISHED, case(1, "10:05:10"), case(2, "10:05:20")]
    log.write_text("\n".join([*lines, "Traceback (most recent call last):", error]) + "\n")
    status = fold_status(log, "3d_fullres", "0", results)
    assert (
        status.line() == f"train 3d_fullres fold 0  validation case 2/4 (with npz)  failed  {error}"
    )
    assert status.state == FAILED


def test_kept_logs_of_earlier_attempts_are_read_first(tmp_path: Path) -> None:
    """A rerun moved the stopped attempt's log to ``<log>.1``: the current log starts empty."""
    stopped = (
        "2026-12-06 10:03:00: D 3d_fullres fold 0: stopped at epoch 2 by SIGUSR1; "
        "checkpoint_latest.pth holds epoch 3; exit 75: the retry continues with --c"
    )
    epoch_3 = "2026-12-06 10:03:00: epoch 3/5: 60.00 s; ETA 0:02:00 (about 2026-12-06 10:05)"
    log, results = work(tmp_path)
    log.with_name(log.name + ".1").write_text("\n".join([FRESH, epoch_3, stopped]) + "\n")
    log.write_text("")
    starting = fold_status(log, "3d_fullres", "0", results)
    assert (starting.progress, starting.state) == ("epoch 3/5", RUNNING)
    assert starting.detail.startswith("starting; log written "), starting.detail
    continued = "2026-12-06 12:00:00: continuing from /w/fold_0/checkpoint_latest.pth at epoch 3"
    log.write_text(continued + "\n")
    status = fold_status(log, "3d_fullres", "0", results)
    assert (status.progress, status.state) == ("epoch 3/5", CONTINUING)
    assert status.detail.startswith("after stopped at epoch 2 by SIGUSR1; log written "), status
    assert [job.job for job in run_status(log.parent, results)] == ["train 3d_fullres fold 0"]
