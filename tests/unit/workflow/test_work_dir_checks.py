"""workflow.work_dir_checks at the level of the function check_config calls, every overlap case
of issue 51 among them (tests/helpers/work_dir_overlaps.py's decoy trees); the real Snakemake runs
of a few of them (no job) are in tests/integration/test_work_dir_overlap.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.work_dir_checks import WRITTEN_FOLDERS, check_work_dir_placement
from tests.helpers.work_dir_overlaps import OVERLAPS, checksums


def _dataset(folder: Path) -> Path:
    (folder / "imagesTr").mkdir(parents=True)
    (folder / "dataset.json").write_text("{}")
    return folder


def _refused(work: Path | str, raw: object, *words: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        check_work_dir_placement(work, raw)
    line = str(caught.value)
    assert "\n" not in line and str(work) in line, line
    for word in words:
        assert word in line, line
    return line


@pytest.mark.parametrize("case", list(OVERLAPS), ids=list(OVERLAPS))
def test_each_overlap_is_refused_in_one_line_naming_both_paths(tmp_path: Path, case: str) -> None:
    build, words, names_raw = OVERLAPS[case]
    tree = tmp_path / "tree"
    work, raw = build(tree)
    before = checksums(tree)
    line = _refused(str(work), str(raw), words, *([str(raw)] if names_raw else []))
    assert line.startswith("config ")
    assert checksums(tree) == before  # the check only reads


def test_a_folder_above_the_home_folder_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "users" / "me"))
    (tmp_path / "users" / "me").mkdir(parents=True)
    _refused(tmp_path / "users", None, "a folder above the home folder")
    _refused(tmp_path / "users" / "me", None, "the home folder")
    check_work_dir_placement(tmp_path / "users" / "me" / "work", None)  # a folder in it is fine


@pytest.mark.parametrize("folder", WRITTEN_FOLDERS)
def test_raw_root_in_any_folder_the_workflow_writes_is_refused(tmp_path: Path, folder) -> None:
    raw = tmp_path / "work" / folder / "nested"
    line = _refused(tmp_path / "work", str(raw), f"inside {folder}/", str(raw))
    assert line.startswith("config dataset.raw_root: ")


def test_the_workflows_own_raw_folder_and_separate_folders_pass(tmp_path: Path) -> None:
    _dataset(tmp_path / "work" / "raw" / "Dataset900_Synth")
    check_work_dir_placement(tmp_path / "work", str(tmp_path / "work" / "raw"))
    check_work_dir_placement(tmp_path / "work", str(tmp_path / "work" / "my data"))
    check_work_dir_placement(tmp_path / "work", None)  # the synthetic demo
    check_work_dir_placement(tmp_path / "work", "  ")  # the raw dataset check names it
    # a sibling whose name only starts like work_dir's is apart from it
    check_work_dir_placement(tmp_path / "work", str(tmp_path / "work mv" / "preprocessed"))


def test_a_relative_work_dir_is_compared_from_the_folder_it_runs_in(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _dataset(tmp_path / "raw" / "Dataset900_Synth")
    _refused("raw/run", str(tmp_path / "raw"), "is inside dataset.raw_root")
    _refused(".", str(tmp_path / "preprocessed"), "inside preprocessed/")
    check_work_dir_placement("work", "raw")
