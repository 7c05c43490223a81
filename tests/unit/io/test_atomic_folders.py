"""nnunet_core.io.atomic beyond single files: a named temporary (checkpoints), and folders
swapped in whole (preprocessing, the synthetic dataset) or merged by renames (model install)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.io.atomic import atomic_path, merge_folder, replace_folder


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_a_named_temporary_is_used_and_renamed(tmp_path: Path) -> None:
    target = tmp_path / "fold_0" / "checkpoint_latest.pth"
    named = tmp_path / "fold_0" / ".checkpoint_latest.pth.123.partial"
    with atomic_path(target, temporary=named, sync_folder=True) as tmp:
        assert tmp == named
        tmp.write_text("epoch 3")
        assert not target.exists()  # nothing at the target before the rename
    assert target.read_text() == "epoch 3"
    assert sorted(p.name for p in target.parent.iterdir()) == ["checkpoint_latest.pth"]


def test_a_failed_write_keeps_the_old_file_and_removes_the_named_temporary(
    tmp_path: Path,
) -> None:
    target = tmp_path / "checkpoint_latest.pth"
    target.write_text("epoch 2")
    named = tmp_path / ".checkpoint_latest.pth.123.partial"
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_path(target, temporary=named, fsync=False) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert target.read_text() == "epoch 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_latest.pth"]


def test_replace_folder_swaps_a_whole_folder_in(tmp_path: Path) -> None:
    target = tmp_path / "nnUNetPlans_3d_fullres"
    target.mkdir()
    (target / "old_case.b2nd").write_text("old")
    new = tmp_path / ".nnUNetPlans_3d_fullres.staging-1"
    new.mkdir()
    (new / "case.b2nd").write_text("new")
    replace_folder(new, target)
    assert _tree(target) == {"case.b2nd": "new"}  # nothing of the old folder mixed in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nnUNetPlans_3d_fullres"]


def test_replace_folder_into_a_missing_target(tmp_path: Path) -> None:
    new = tmp_path / ".staging"
    new.mkdir()
    (new / "dataset.json").write_text("{}")
    replace_folder(new, tmp_path / "Dataset900_Synth")
    assert _tree(tmp_path / "Dataset900_Synth") == {"dataset.json": "{}"}


def test_replace_folder_puts_the_old_folder_back_when_the_swap_fails(tmp_path: Path) -> None:
    target = tmp_path / "Dataset900_Synth"
    target.mkdir()
    (target / "dataset.json").write_text("old")
    with pytest.raises(FileNotFoundError):
        replace_folder(tmp_path / "vanished_staging", target)
    assert _tree(target) == {"dataset.json": "old"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dataset900_Synth"]


def test_merge_folder_adds_and_replaces_but_keeps_what_only_the_target_has(
    tmp_path: Path,
) -> None:
    target = tmp_path / "results"
    (target / "Dataset1" / "model" / "fold_0").mkdir(parents=True)
    (target / "Dataset1" / "model" / "fold_0" / "checkpoint_final.pth").write_text("old")
    (target / "Dataset1" / "model" / "fold_0" / "notes.txt").write_text("mine")
    source = tmp_path / "unpacked"
    (source / "Dataset1" / "model" / "fold_0").mkdir(parents=True)
    (source / "Dataset1" / "model" / "fold_0" / "checkpoint_final.pth").write_text("new")
    (source / "Dataset2").mkdir()
    (source / "Dataset2" / "dataset.json").write_text("{}")
    merge_folder(source, target)
    assert _tree(target) == {
        "Dataset1/model/fold_0/checkpoint_final.pth": "new",
        "Dataset1/model/fold_0/notes.txt": "mine",
        "Dataset2/dataset.json": "{}",
    }
    assert _tree(source) == {}  # everything was moved, nothing copied
