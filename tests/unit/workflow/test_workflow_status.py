"""Reading a fold job's log: the last epoch line (also with more fields than today's), the
pseudo Dice, and the state from the lines the trainer and the CLI write."""

from __future__ import annotations

from pathlib import Path

from nnunet_core.workflow.status import (
    CONTINUING,
    DONE,
    FAILED,
    RUNNING,
    STOPPED,
    fold_state,
    fold_status,
    prediction_status,
)

FRESH = "2026-12-06 00:37:58: no checkpoint in /w/fold_0 to continue from; starting fresh"
EPOCH_1 = (
    "2026-12-06 00:38:10: epoch 1/3: 5.02 s (data wait 0.31 s, compute 4.50 s); "
    "ETA 0:00:10 (about 2026-12-06 00:38)"
)
DICE = "2026-12-06 00:38:10: Pseudo dice [0.5, nan]"
STOP = (
    "2026-12-06 00:38:15: D 3d_fullres fold 0: stopped at epoch 1 by SIGUSR1; "
    "checkpoint_latest.pth holds epoch 2; exit 75: the retry continues with --c"
)
CONTINUED = "2026-12-06 00:40:01: continuing from /w/fold_0/checkpoint_latest.pth at epoch 2"
ERROR = "nnunet-core train: error: /w/plans.json: no such file"
USER_STOP_EXIT = (
    "nnunet-core train: stopped by the user; exit 130 (not retried): the same workflow command "
    "continues with --c"
)


def test_an_epoch_line_with_more_fields_still_parses(tmp_path: Path) -> None:
    log = tmp_path / "train_3d_fullres_fold0.log"
    log.write_text("\n".join([FRESH, EPOCH_1, DICE]) + "\n")
    status = fold_status(log, "3d_fullres", "0", tmp_path)
    assert (status.progress, status.eta, status.pseudo_dice, status.state) == (
        "epoch 1/3",
        "0:00:10 (about 2026-12-06 00:38)",
        "[0.5, nan]",
        RUNNING,
    )


def test_states_follow_the_last_event() -> None:
    assert fold_state([FRESH, EPOCH_1])[0] == RUNNING
    assert fold_state([FRESH, EPOCH_1, STOP]) == (
        STOPPED,
        "stopped at epoch 1 by SIGUSR1; the same command continues it from its checkpoint "
        "(so does its retry, if one is left)",
    )
    user_stop = STOP.replace("SIGUSR1", "the user (SIGINT)")
    assert fold_state([FRESH, EPOCH_1, user_stop, USER_STOP_EXIT]) == (
        STOPPED,
        "stopped at epoch 1 by the user (SIGINT); the same command continues it from its "
        "checkpoint",
    )
    assert fold_state([FRESH, STOP, CONTINUED]) == (
        CONTINUING,
        "after stopped at epoch 1 by SIGUSR1",
    )
    assert fold_state([FRESH, "2026-12-06 00:41:00: Mean Validation Dice: 0.8"])[0] == DONE
    assert fold_state([FRESH, EPOCH_1, ERROR]) == (FAILED, ERROR)
    assert fold_state(["Traceback (most recent call last):", "RuntimeError: boom"]) == (
        FAILED,
        "RuntimeError: boom",
    )


def test_a_prediction_counts_cases(tmp_path: Path) -> None:
    log = tmp_path / "predict_2d.log"
    log.write_text("predict: 3 case(s) on cpu, 2 torch threads\n"
                   "predict: case 1/3 (c_1) 2.0 s; ETA 0:00:04\n")  # fmt: skip
    status = prediction_status(log, "2d")
    assert (status.progress, status.eta, status.state) == ("case 1/3", "0:00:04", RUNNING)
    with log.open("a") as handle:
        handle.write(
            "predict: case 3/3 (c_3) 2.0 s; 3 cases in 0:00:06\nwrote 3 prediction(s) to x\n"
        )
    assert prediction_status(log, "2d").line() == "predict 2d  case 3/3  done"
