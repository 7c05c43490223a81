"""A work_dir that overlaps the raw data, or is / or the home folder, stops the real workflow
before any job (issue 51).

The issue's probe: ``work_dir: X`` with ``raw_root: X/preprocessed`` made Snakemake report a
cyclic dependency, go on, and delete the raw ``dataset.json``. Each case here is a dry run of the
real Snakefile (``snakemake -n``) that must end with one line naming both paths, leave a decoy
raw tree byte for byte as it was (a checksum of every file) and plan no job.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.workflow import DATASET, snakemake, tiny_config


def _raw_dataset(folder: Path) -> Path:
    """A decoy nnU-Net raw dataset (the refusal comes before anything reads the images)."""
    for sub, name in (("imagesTr", "a_0000.nii.gz"), ("labelsTr", "a.nii.gz")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / name).write_bytes(os.urandom(64))
    (folder / "dataset.json").write_text(
        '{"channel_names": {"0": "CT"}, "labels": {"background": 0, "x": 1}, '
        '"numTraining": 1, "file_ending": ".nii.gz"}'
    )
    return folder


def _checksums(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def _real(config: dict, raw_root: Path) -> dict:
    config["dataset"].update(id=900, name="Synth", raw_root=str(raw_root))
    config["dataset"]["synthetic"] = {"enabled": False}
    return config


# builds the decoy raw data under the tree; returns (work_dir, raw_root)
Case = Callable[[Path], tuple[Path, Path | None]]


def _raw_in_preprocessed(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "X" / "preprocessed" / DATASET)
    return tree / "X", tree / "X" / "preprocessed"


def _raw_in_results(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "X" / "results" / "raw" / DATASET)
    return tree / "X", tree / "X" / "results" / "raw"


def _raw_is_work_dir(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "X" / DATASET)
    return tree / "X", tree / "X"


def _work_in_raw(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "raw" / DATASET)
    return tree / "raw" / "work", tree / "raw"


def _work_is_a_dataset(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "raw" / DATASET)
    _raw_dataset(tree / "other" / "Dataset004_Other")
    return tree / "other" / "Dataset004_Other", tree / "raw"


def _work_is_a_raw_root(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "raw" / DATASET)
    _raw_dataset(tree / "other" / "Dataset004_Other")
    return tree / "other", tree / "raw"


def _raw_through_a_link(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "X" / "logs" / "data" / DATASET)
    (tree / "link").symlink_to(tree / "X" / "logs" / "data")
    return tree / "X", tree / "link"


def _work_through_a_link(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "raw" / DATASET)
    (tree / "raw" / "inner").mkdir()
    (tree / "alias").symlink_to(tree / "raw" / "inner")
    return tree / "alias", tree / "raw"


def _root(tree: Path) -> tuple[Path, Path]:
    _raw_dataset(tree / "raw" / DATASET)
    return Path("/"), tree / "raw"


# id -> (the case, words of its one line, whether the line names raw_root too)
OVERLAPS: dict[str, tuple[Case, str, bool]] = {
    "raw-in-preprocessed-the-issues-probe": (_raw_in_preprocessed, "inside preprocessed/", True),
    "raw-in-results": (_raw_in_results, "inside results/", True),
    "raw-is-work-dir": (_raw_is_work_dir, "is work_dir", True),
    "work-dir-in-raw": (_work_in_raw, "is inside dataset.raw_root", True),
    "work-dir-is-a-dataset": (_work_is_a_dataset, "is a raw dataset folder", False),
    "work-dir-is-a-raw-root": (
        _work_is_a_raw_root,
        "is a raw data root (holds Dataset004_Other)",
        False,
    ),
    "raw-through-a-symlink": (_raw_through_a_link, "inside logs/", True),
    "work-dir-through-a-symlink": (_work_through_a_link, "is inside dataset.raw_root", True),
    "work-dir-is-root": (_root, "is the file system's root", False),
}


def _refusal(result, words: str, *paths: Path) -> str:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "ConfigurationError" not in output, output
    assert "Traceback" not in output and "cyclic" not in output.lower(), output
    lines = [
        line.strip()
        for line in output.splitlines()
        if line.strip().startswith("config ") and words in line
    ]
    assert len(lines) == 1, output
    for path in paths:
        assert str(path) in lines[0], lines[0]
    assert "Job stats" not in output and "rule " not in output, output  # no job planned
    return lines[0]


@pytest.mark.parametrize("case", list(OVERLAPS), ids=list(OVERLAPS))
def test_an_overlapping_work_dir_is_refused_before_any_job(tmp_path: Path, case: str) -> None:
    build, words, names_raw = OVERLAPS[case]
    tree = tmp_path / "tree"
    work, raw = build(tree)
    before = _checksums(tree)
    assert before  # the decoy exists
    result = snakemake(tmp_path, _real(tiny_config(work), raw), "-n", check=False)
    shown = [work, raw] if names_raw else [work]
    _refusal(result, words, *shown)
    assert _checksums(tree) == before
    for name in ("preprocessed", "results", "logs", "predictions"):
        assert not (tree / "X" / name / "Dataset900_Synth.partial").exists()
    assert not (work / "logs").exists() or work == tree / "X"


def test_the_home_folder_is_refused_as_work_dir(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "diary.txt").write_text("mine")
    before = _checksums(home / "notes")
    config = tiny_config(home)  # the synthetic demo: no raw_root
    env = {**os.environ, "HOME": str(home)}
    result = snakemake(tmp_path, config, "-n", check=False, env=env)
    _refusal(result, "is the home folder", home)
    assert _checksums(home / "notes") == before
    # nothing of the workflow's (Snakemake itself may keep its ~/.cache)
    assert sorted(p.name for p in home.iterdir() if p.name != ".cache") == ["notes"]


def test_a_paper_run_with_one_overlapping_dataset_is_refused(tmp_path: Path) -> None:
    """Several datasets: every run's config is checked (each run module's common.smk)."""
    tree = tmp_path / "tree"
    work, raw = _raw_in_preprocessed(tree)
    before = _checksums(tree)
    config = tiny_config(work)
    synthetic = config.pop("dataset")["synthetic"]
    del config["seed"]
    config["datasets"] = [
        {"id": 901, "name": "Fine", "synthetic": synthetic},
        {"id": 900, "name": "Synth", "raw_root": str(raw), "synthetic": {"enabled": False}},
    ]
    result = snakemake(tmp_path, config, "-n", check=False)
    _refusal(result, "inside preprocessed/", work, raw)
    assert _checksums(tree) == before


def test_raw_data_in_work_dir_raw_is_the_workflows_own(tmp_path: Path) -> None:
    """``work_dir/raw`` (where the synthetic demo writes) is allowed as raw_root."""
    work = tmp_path / "work"
    _raw_dataset(work / "raw" / DATASET)
    result = snakemake(tmp_path, _real(tiny_config(work), work / "raw"), "-n", check=False)
    output = result.stdout + result.stderr
    assert "config work_dir" not in output and "config dataset.raw_root" not in output, output
    assert result.returncode == 0, output
