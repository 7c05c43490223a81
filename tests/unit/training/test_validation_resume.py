"""Which validation cases a retried fold keeps: all files present, none older than the weights."""

from __future__ import annotations

import os
from pathlib import Path

from nnunet_core.inference.export import exported_files
from nnunet_core.training.fold.validation_resume import done_cases


def write(path: Path, when: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    os.utime(path, ns=(when, when))


def test_cases_written_after_the_weights_are_kept_others_are_not(tmp_path: Path) -> None:
    weights = tmp_path / "checkpoint_final.pth"
    write(weights, 1_000)
    validation = tmp_path / "validation"
    for case, when in (("after", 2_000), ("same", 1_000), ("before", 500)):
        for path in exported_files(validation, case, ".nii.gz", probabilities=True):
            write(path, when)
    write(validation / "partial.nii.gz", 2_000)  # no npz/json yet: killed mid-export
    write(validation / "partial.npz", 2_000)

    def files_of(case: str) -> list[Path]:
        return exported_files(validation, case, ".nii.gz", probabilities=True)

    cases = ["after", "same", "before", "partial", "missing"]
    assert done_cases(cases, weights, files_of) == {"after", "same"}


def test_without_probabilities_the_segmentation_alone_counts(tmp_path: Path) -> None:
    weights = tmp_path / "checkpoint_final.pth"
    write(weights, 1_000)
    write(tmp_path / "v" / "a.nii.gz", 2_000)
    assert done_cases(
        ["a"], weights, lambda c: exported_files(tmp_path / "v", c, ".nii.gz", False)
    ) == {"a"}


def test_no_weights_keep_nothing(tmp_path: Path) -> None:
    write(tmp_path / "v" / "a.nii.gz", 2_000)
    files_of = lambda c: exported_files(tmp_path / "v", c, ".nii.gz", False)  # noqa: E731
    assert done_cases(["a"], tmp_path / "checkpoint_final.pth", files_of) == set()
