"""A fold whose summary stands without checkpoint_final.pth trains again (and says so)."""

from __future__ import annotations

from pathlib import Path

from nnunet_core.workflow.fold_weights import folds_without_weights, retrain_folds_without_weights

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"


def fold(results: Path, name: str, final: bool, model: str = MODEL) -> Path:
    folder = results / model / name
    (folder / "validation").mkdir(parents=True)
    (folder / "validation" / "summary.json").write_text("{}")
    if final:
        (folder / "checkpoint_final.pth").write_bytes(b"w")
    return folder


def test_only_folds_of_this_trainer_and_plans_missing_their_weights(tmp_path: Path) -> None:
    fold(tmp_path, "fold_0", final=True)
    missing = fold(tmp_path, "fold_1", final=False)
    fold(tmp_path, "fold_0", final=False, model="OtherTrainer__nnUNetPlans__3d_fullres")
    assert folds_without_weights(tmp_path, "nnUNetTrainer", "nnUNetPlans") == [missing]
    assert folds_without_weights(tmp_path / "absent", "nnUNetTrainer", "nnUNetPlans") == []


def test_a_run_removes_the_summary_and_a_dry_run_only_says_so(tmp_path: Path) -> None:
    missing = fold(tmp_path, "fold_1", final=False)
    summary = missing / "validation" / "summary.json"
    dry = retrain_folds_without_weights(tmp_path, "nnUNetTrainer", "nnUNetPlans", dry_run=True)
    assert dry == [
        f"{MODEL}/fold_1: no checkpoint_final.pth; a run (not this dry run) trains it again"
    ]
    assert summary.is_file()
    lines = retrain_folds_without_weights(tmp_path, "nnUNetTrainer", "nnUNetPlans", dry_run=False)
    assert lines == [f"{MODEL}/fold_1: no checkpoint_final.pth, so the fold trains again"]
    assert not summary.exists()


def test_a_user_trainer_is_found_by_its_class_name(tmp_path: Path) -> None:
    missing = fold(tmp_path, "fold_0", final=False, model="MyTrainer__nnUNetPlans__2d")
    found = folds_without_weights(tmp_path, "/home/me/my trainer.py:MyTrainer", "nnUNetPlans")
    assert found == [missing]
