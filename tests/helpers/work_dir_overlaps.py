"""The work_dir / raw_root overlaps the workflow refuses (issue 51), as decoy trees: one set of
cases for the unit test of nnunet_core/workflow/work_dir_checks.py (every case, the function
called directly) and for the end-to-end test (a few cases through real Snakemake).

A case builds its decoy raw data under ``tree`` and returns ``(work_dir, raw_root)``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from tests.helpers.training import DATASET


def raw_dataset(folder: Path) -> Path:
    """A decoy nnU-Net raw dataset (the refusal comes before anything reads the images)."""
    for sub, name in (("imagesTr", "a_0000.nii.gz"), ("labelsTr", "a.nii.gz")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / name).write_bytes(os.urandom(64))
    (folder / "dataset.json").write_text(
        '{"channel_names": {"0": "CT"}, "labels": {"background": 0, "x": 1}, '
        '"numTraining": 1, "file_ending": ".nii.gz"}'
    )
    return folder


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` (symlinks not followed): the decoy, byte for byte."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


Case = Callable[[Path], tuple[Path, Path]]


def raw_in_preprocessed(tree: Path) -> tuple[Path, Path]:
    """The issue's probe: ``work_dir: X`` with ``raw_root: X/preprocessed``."""
    raw_dataset(tree / "X" / "preprocessed" / DATASET)
    return tree / "X", tree / "X" / "preprocessed"


def raw_in_results(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "X" / "results" / "raw" / DATASET)
    return tree / "X", tree / "X" / "results" / "raw"


def raw_is_work_dir(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "X" / DATASET)
    return tree / "X", tree / "X"


def work_in_raw(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "raw" / DATASET)
    return tree / "raw" / "work", tree / "raw"


def work_is_a_dataset(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "raw" / DATASET)
    raw_dataset(tree / "other" / "Dataset004_Other")
    return tree / "other" / "Dataset004_Other", tree / "raw"


def work_is_a_raw_root(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "raw" / DATASET)
    raw_dataset(tree / "other" / "Dataset004_Other")
    return tree / "other", tree / "raw"


def raw_through_a_link(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "X" / "logs" / "data" / DATASET)
    (tree / "link").symlink_to(tree / "X" / "logs" / "data")
    return tree / "X", tree / "link"


def work_through_a_link(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "raw" / DATASET)
    (tree / "raw" / "inner").mkdir()
    (tree / "alias").symlink_to(tree / "raw" / "inner")
    return tree / "alias", tree / "raw"


def work_is_root(tree: Path) -> tuple[Path, Path]:
    raw_dataset(tree / "raw" / DATASET)
    return Path("/"), tree / "raw"


# id -> (the case, words of its one line, whether the line names raw_root too)
OVERLAPS: dict[str, tuple[Case, str, bool]] = {
    "raw-in-preprocessed-the-issues-probe": (raw_in_preprocessed, "inside preprocessed/", True),
    "raw-in-results": (raw_in_results, "inside results/", True),
    "raw-is-work-dir": (raw_is_work_dir, "is work_dir", True),
    "work-dir-in-raw": (work_in_raw, "is inside dataset.raw_root", True),
    "work-dir-is-a-dataset": (work_is_a_dataset, "is a raw dataset folder", False),
    "work-dir-is-a-raw-root": (
        work_is_a_raw_root,
        "is a raw data root (holds Dataset004_Other)",
        False,
    ),
    "raw-through-a-symlink": (raw_through_a_link, "inside logs/", True),
    "work-dir-through-a-symlink": (work_through_a_link, "is inside dataset.raw_root", True),
    "work-dir-is-root": (work_is_root, "is the file system's root", False),
}
