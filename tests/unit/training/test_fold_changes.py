"""What changed since a fold was trained (nnunet_core.training.fold.changes), the train job's
start-over with its folder set aside, and the workflow's view of the same before any job
(nnunet_core.workflow.fold_reuse). Real fold folders, real locks, real files."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pytest
import torch

from nnunet_core.io.plans import Plans
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    FOLD_LOCK_NAME,
    fold_dirs_in,
    trained_model_dir,
)
from nnunet_core.layout.roots import Roots
from nnunet_core.training.fold.changes import (
    changes,
    describe,
    recorded_settings,
    replaced_folder,
    settings_of_fold,
    start_over_if_changed,
)
from nnunet_core.training.fold.lock import FoldLock, FoldLockedError
from nnunet_core.training.fold.run import FoldFlags, FoldRequest
from nnunet_core.training.fold.settings_table import INVALIDATING, SETTINGS
from nnunet_core.training.fold.setup import FoldSetup
from nnunet_core.training.trainer.settings import TrainerSettings
from nnunet_core.workflow.fold_reuse import fold_restart_lines, train_rerun_trigger

PLANS = {"plans_name": "nnUNetPlans", "configurations": {"3d_fullres": {"batch_size": 2}}}
# keys only the workflow knows (its jobs' resources and which folds it runs)
WORKFLOW_ONLY = {
    "training.folds",
    "training.nodes",
    "training.rdzv_endpoint",
    "training.folds_per_gpu",
    "training.retries",
    "training.threads",
    "training.mem_mb",
    "training.runtime",
}


def fold_setup(folder: Path) -> FoldSetup:
    return FoldSetup(
        plans=Plans(PLANS),
        configuration_name="3d_fullres",
        configuration=None,  # type: ignore[arg-type]  # not read here
        dataset_json={},
        label_spec=None,  # type: ignore[arg-type]
        num_input_channels=1,
        fold=0,
        data_folder=folder,
        gt_folder=folder,
        output_folder=folder,
        train_keys=["a", "b"],
        val_keys=["c"],
    )


def fold_request(folder: Path, resume: bool = True, **settings) -> FoldRequest:
    return FoldRequest(
        roots=Roots(results=folder.parent.parent),
        dataset="Dataset900_Synth",
        configuration="3d_fullres",
        fold=0,
        plans="nnUNetPlans",
        settings=TrainerSettings(**{"num_iterations": 5, "save_every": 1, **settings}),
        device=torch.device("cpu"),
        flags=FoldFlags(resume=resume, npz=True),
        arguments={"device": "cpu"},
    )


def trained_fold(folder: Path, **settings) -> dict:
    """A fold folder as a finished job leaves it: weights and a provenance record."""
    folder.mkdir(parents=True)
    (folder / CHECKPOINT_FINAL).write_bytes(b"weights")
    recorded = settings_of_fold(fold_request(folder, **settings), fold_setup(folder))
    (folder / "provenance.json").write_text(json.dumps({"settings": recorded}))
    return recorded


@pytest.fixture
def fold(tmp_path: Path) -> Path:
    return trained_model_dir(tmp_path / "results" / "Dataset900_Synth", "3d_fullres") / "fold_0"


def test_changes_are_split_into_invalidating_and_not():
    recorded = {"training.iterations_per_epoch": 5, "training.save_every": 1, "seed": 0}
    current = {"training.iterations_per_epoch": 2, "training.save_every": 10, "fold": "0"}
    found = changes(recorded, current)  # seed and fold: one side only, not compared
    assert [(c.key, c.old, c.new, c.invalidates) for c in found] == [
        ("training.iterations_per_epoch", 5, 2, True),
        ("training.save_every", 1, 10, False),
    ]
    assert describe(found) == (
        "training.iterations_per_epoch changed 5 -> 2, training.save_every changed 1 -> 10"
    )
    assert changes({"optimizer": {"a": [1, 2]}}, {"optimizer": {"a": (1, 2)}}) == []
    sha = [c.describe() for c in changes({"plans_sha256": "a" * 64}, {"plans_sha256": "b" * 64})]
    assert sha == ["plans_sha256 changed aaaaaaaaaaaa -> bbbbbbbbbbbb"]


def test_the_job_records_every_setting_it_knows(fold):
    values = settings_of_fold(fold_request(fold), fold_setup(fold))
    assert set(values) == {row.key for row in SETTINGS} - WORKFLOW_ONLY
    assert set(INVALIDATING) <= set(values)
    assert values["training.iterations_per_epoch"] == 5 and values["fold"] == "0"
    assert values["training.device"] == "cpu" and values["training.npz"] is True
    other = fold_setup(fold).__class__(**{**fold_setup(fold).__dict__, "val_keys": ["b"]})
    assert settings_of_fold(fold_request(fold), other)["splits_sha256"] != values["splits_sha256"]


def test_a_replaced_folder_is_never_read_as_a_fold(fold):
    fold.mkdir(parents=True)
    when = datetime(2026, 12, 7, 5, 30, 12)
    first = replaced_folder(fold, 0, when)
    assert first.name == "replaced-fold_0-20261207T053012"
    first.mkdir()
    assert replaced_folder(fold, 0, when).name == "replaced-fold_0-20261207T053012-2"
    assert fold_dirs_in(fold.parent) == [fold]


def test_an_invalidating_change_sets_the_folder_aside_and_locks_a_new_one(fold, capsys):
    trained_fold(fold)
    lock = FoldLock(fold)
    lock.acquire()
    request = fold_request(fold, num_iterations=2)
    new_lock = start_over_if_changed(request, fold_setup(fold), lock)
    try:
        assert new_lock is not lock
        aside = [p for p in fold.parent.iterdir() if p.name.startswith("replaced-fold_0-")]
        assert len(aside) == 1
        assert (aside[0] / CHECKPOINT_FINAL).read_bytes() == b"weights"
        assert recorded_settings(aside[0])["training.iterations_per_epoch"] == 5
        assert not (aside[0] / FOLD_LOCK_NAME).exists()
        assert sorted(p.name for p in fold.iterdir()) == [FOLD_LOCK_NAME]  # new and locked
        with pytest.raises(FoldLockedError):
            FoldLock(fold).acquire()
    finally:
        new_lock.release()
    line = capsys.readouterr().err
    assert line == (
        "nnunet-core train: Dataset900_Synth 3d_fullres fold 0 starts over: "
        f"training.iterations_per_epoch changed 5 -> 2; its earlier folder is kept as {aside[0]}\n"
    )


@pytest.mark.parametrize(
    ("change", "resume"),
    [({"save_every": 10}, True), ({}, True), ({"num_iterations": 2}, False)],
    ids=["save-every-continues", "unchanged", "without-c"],
)
def test_other_cases_leave_the_folder_as_it_is(fold, capsys, change, resume):
    trained_fold(fold)
    lock = FoldLock(fold)
    lock.acquire()
    try:
        kept = start_over_if_changed(fold_request(fold, resume, **change), fold_setup(fold), lock)
        assert kept is lock
        assert [p.name for p in fold.parent.iterdir()] == ["fold_0"]
        assert (fold / CHECKPOINT_FINAL).is_file()
    finally:
        lock.release()
    err = capsys.readouterr().err
    assert ("continues (training.save_every changed 1 -> 10" in err) == bool(change and resume)


def test_a_fold_without_a_checkpoint_is_not_set_aside(fold):
    trained_fold(fold)
    (fold / CHECKPOINT_FINAL).unlink()
    lock = FoldLock(fold)
    lock.acquire()
    try:
        assert start_over_if_changed(fold_request(fold, num_iterations=2), fold_setup(fold), lock)
        assert [p.name for p in fold.parent.iterdir()] == ["fold_0"]
    finally:
        lock.release()


# ------------------------------------------------------------------------- the workflow's side
def workflow_config(**training) -> dict:
    base = {
        "trainer": "nnUNetTrainer",
        "epochs": 1000,
        "iterations_per_epoch": 5,
        "val_iterations_per_epoch": 50,
        "save_every": 1,
        "npz": True,
    }
    return {"seed": 0, "deterministic": False, "training": {**base, **training}}


SPLIT = {"train": ["a", "b"], "val": ["c"]}


def restart_lines(fold: Path, config: dict, split: dict = SPLIT) -> list[str]:
    plans, splits = fold.parent / "plans.json", fold.parent / "splits.json"
    plans.write_text(json.dumps(PLANS))
    splits.write_text(json.dumps([split]))
    return fold_restart_lines(
        config,
        dataset="Dataset900_Synth",
        results=fold.parent.parent,
        trainer="nnUNetTrainer",
        plans_name="nnUNetPlans",
        folds=[0],
        plans_file=plans,
        splits_file=splits,
        pretrained=None,
    )


def test_the_workflow_names_the_fold_and_the_key_before_any_job(fold):
    trained_fold(fold)
    assert restart_lines(fold, workflow_config(save_every=10)) == []
    assert restart_lines(fold, workflow_config(iterations_per_epoch=2)) == [
        "Dataset900_Synth 3d_fullres fold 0 starts over: training.iterations_per_epoch changed "
        "5 -> 2 (its folder is kept as replaced-fold_0-<time> when the job starts)"
    ]
    assert sorted(p.name for p in fold.parent.iterdir() if p.is_dir()) == ["fold_0"]


def test_the_workflow_sees_a_changed_split_as_the_job_will(fold):
    trained_fold(fold)
    assert restart_lines(fold, workflow_config()) == []
    lines = restart_lines(fold, workflow_config(), split={"train": ["a"], "val": ["b", "c"]})
    assert len(lines) == 1 and "splits_sha256 changed" in lines[0], lines


def test_the_rerun_trigger_follows_the_trainer_source_and_not_save_every(tmp_path):
    source = tmp_path / "my_trainer.py"
    source.write_text("from nnunet_core import Trainer\n\nclass Mine(Trainer):\n    pass\n")
    config = workflow_config(trainer=f"{source}:Mine")
    before = train_rerun_trigger(config, None)
    assert train_rerun_trigger(workflow_config(trainer=f"{source}:Mine", save_every=7), None) == (
        before
    )
    assert "training.iterations_per_epoch=5" in before
    source.write_text(source.read_text() + "# changed\n")
    assert train_rerun_trigger(config, None) != before
    assert train_rerun_trigger(workflow_config(trainer=f"{source}:Mine", npz=False), None) != (
        train_rerun_trigger(config, None)
    )


def test_pretrained_weights_count_by_content_and_a_removed_file_is_not_compared(fold, tmp_path):
    weights = tmp_path / "weights.pth"
    weights.write_bytes(b"one")
    request = fold_request(fold)
    request = request.__class__(
        **{**request.__dict__, "flags": FoldFlags(resume=True, pretrained_weights=str(weights))}
    )
    first = settings_of_fold(request, fold_setup(fold))["pretrained_weights_sha256"]
    assert first == hashlib.sha256(b"one").hexdigest()
    weights.write_bytes(b"two!")
    assert settings_of_fold(request, fold_setup(fold))["pretrained_weights_sha256"] != first
    weights.unlink()  # the fold continues from its own checkpoint: nothing to compare
    assert "pretrained_weights_sha256" not in settings_of_fold(request, fold_setup(fold))
    assert (
        settings_of_fold(fold_request(fold), fold_setup(fold))["pretrained_weights_sha256"] is None
    )
