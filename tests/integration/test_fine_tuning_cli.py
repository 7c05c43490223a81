"""``nnunet-core train --c -pretrained_weights P`` through the real CLI, single process and DDP
(``-num_gpus 2``, gloo on the CPU): a fresh fold starts from P (log line, provenance names P and
its sha256); stopped by its deadline after epoch 0 and run again with the same command, it
continues from its own checkpoint_latest, not from P.

The DDP case trains a user's trainer named by file path (the FocalDice example copied outside the
repository; same network, another loss): each rank loads it from its file and the model folder
records it, so one DDP run checks fine-tuning and user trainers under DDP together.

The tiny preprocessed dataset is conftest's ``env``; P is nnUNetTrainer's fold 0, conftest's
shared ``trained_tiny_fold`` copied into it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nnunet_core.model import checkpoint as ckpt
from tests.helpers.training import CONFIG, MODEL, check, check_stopped, cli, copy_shared_model
from tests.helpers.user_trainers import by_path, copy_examples, example_file, recorded_from_file

pytestmark = pytest.mark.slow

SHORT = ["-device", "cpu", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0"]
# now + epoch + margin > deadline after the first epoch: a stop after epoch 0, whatever the speed
STOP_AFTER_FIRST_EPOCH = ["--deadline", "3600", "--stop-margin", "1e7"]
USER_TRAINER = "FocalDiceTrainer"


def model_folder(env: dict[str, str], trainer: str | None = None) -> Path:
    model = MODEL if trainer is None else f"{trainer}__nnUNetPlans__{CONFIG}"
    return Path(env["nnUNet_results"]) / "Dataset900_Synth" / model


def fold_folder(env: dict[str, str], fold: int | str, trainer: str | None = None) -> Path:
    return model_folder(env, trainer) / f"fold_{fold}"


def log_of(folder: Path) -> str:
    return "".join(p.read_text() for p in sorted(folder.glob("training_log_*.txt")))


@pytest.fixture(scope="module")
def pretrained(env, trained_tiny_fold: Path) -> Path:
    """nnUNetTrainer's fold 0 (conftest's shared fold, copied into this module's ``env``): the
    weights the other folds start from."""
    return copy_shared_model(trained_tiny_fold, env) / ckpt.FINAL


@pytest.fixture(scope="module")
def my_trainers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The FocalDice example copied to a folder outside the repository (a user's own file)."""
    return copy_examples(tmp_path_factory.mktemp("my_trainers"), [USER_TRAINER])


@pytest.mark.parametrize(
    ("fold", "gpus", "trainer"),
    [(1, [], None), (2, ["-num_gpus", "2"], USER_TRAINER)],
    ids=["one", "ddp"],
)
def test_c_with_pretrained_weights_starts_from_them_once_then_continues(
    env, pretrained: Path, my_trainers: Path, fold: int, gpus: list[str], trainer: str | None
) -> None:
    folder = fold_folder(env, fold, trainer)
    command = ["train", "900", CONFIG, str(fold), *gpus, *SHORT, "--epochs", "2", "--c"]
    command += ["-pretrained_weights", str(pretrained)]
    if trainer is not None:  # named by the path of the user's file
        command += ["-tr", by_path(my_trainers, trainer)]
    first = check_stopped(cli(env, *command, *STOP_AFTER_FIRST_EPOCH))
    assert "stopped at epoch 0 by deadline" in first.stdout
    log = log_of(folder)
    assert log.count("DDP ") == (2 if gpus else 0)  # under DDP both ranks report where they run
    assert f"no checkpoint in {folder} to continue from; starting from the pretrained" in log
    loaded = f"loaded pretrained weights from {pretrained}; not loaded (upstream's rule"
    assert f"{loaded}: the segmentation heads start fresh): decoder.heads.0.weight, " in log
    assert log.count("loaded pretrained weights from") == 1  # DDP: rank 0 alone logs

    check(cli(env, *command))  # the same command again: the fold's own checkpoint wins
    log = log_of(folder)
    assert f"continuing from {folder / ckpt.LATEST} at epoch 1" in log
    assert (
        f"the fold has its own checkpoint (checkpoint_latest.pth): -pretrained_weights "
        f"{pretrained} not loaded"
    ) in log
    assert log.count("loaded pretrained weights from") == 1
    assert log.count("DDP ") == (4 if gpus else 0)  # both ranks again in the continued run
    assert (folder / ckpt.FINAL).is_file() and (folder / "validation" / "summary.json").is_file()
    if trainer is not None:  # every rank loaded it from its file; the model folder records it
        recorded_from_file(model_folder(env, trainer), trainer, example_file(my_trainers, trainer))

    attempts = json.loads((folder / "provenance.json").read_text())["attempts"]
    assert [(a["status"], a["start_epoch"]) for a in attempts] == [("stopped", 0), ("finished", 1)]
    start = attempts[0]["start_weights"]
    assert {k: v for k, v in start.items() if k != "not_loaded"} == {
        "from": "pretrained",
        "path": str(pretrained.resolve()),
        "sha256": hashlib.sha256(pretrained.read_bytes()).hexdigest(),
    }
    assert start["not_loaded"] and all(".heads." in key for key in start["not_loaded"])
    assert f"fresh): {', '.join(start['not_loaded'])}\n" in log  # what the log line says
    assert attempts[1]["start_weights"] == {
        "from": "checkpoint",
        "path": str((folder / ckpt.LATEST).resolve()),
        "epoch": 1,
    }


def test_without_c_pretrained_weights_are_recorded_and_a_plain_start_is_fresh(
    env, pretrained: Path
) -> None:
    folder = fold_folder(env, 3)
    check(
        cli(
            env,
            "train",
            "900",
            CONFIG,
            "3",
            *SHORT,
            "--epochs",
            "1",
            "-pretrained_weights",
            str(pretrained),
        )
    )
    start = json.loads((folder / "provenance.json").read_text())["attempts"][0]["start_weights"]
    assert (start["from"], start["path"]) == ("pretrained", str(pretrained.resolve()))
    source = json.loads((pretrained.parent / "provenance.json").read_text())
    assert source["attempts"][0]["start_weights"] == {"from": "fresh"}
