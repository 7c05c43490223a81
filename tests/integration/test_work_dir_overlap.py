"""A work_dir that overlaps the raw data, or is /, stops the real workflow before any job
(issue 51).

The issue's probe: ``work_dir: X`` with ``raw_root: X/preprocessed`` made Snakemake report a
cyclic dependency, go on, and delete the raw ``dataset.json``. Each case here is a dry run of the
real Snakefile (``snakemake -n``) that must end with one line naming both paths, leave a decoy
raw tree byte for byte as it was (a checksum of every file) and plan no job.

End to end: the probe, both symlink cases, ``/`` and a paper run (several datasets). A refusal
takes the same path through the Snakefile for every case, so the other cases' detection (raw in
results/, raw_root equal to work_dir, work_dir in raw_root, work_dir a dataset or a raw root, the
home folder, and work_dir/raw allowed) is tested on the function check_config calls:
tests/unit/workflow/test_work_dir_checks.py, on the same decoy trees (tests/helpers/
work_dir_overlaps.py). A real run with raw_root work_dir/raw: test_workflow_names.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.work_dir_overlaps import OVERLAPS, checksums, raw_in_preprocessed
from tests.helpers.workflow import snakemake, tiny_config

END_TO_END = [
    "raw-in-preprocessed-the-issues-probe",
    "raw-through-a-symlink",
    "work-dir-through-a-symlink",
    "work-dir-is-root",
]


def _real(config: dict, raw_root: Path) -> dict:
    config["dataset"].update(id=900, name="Synth", raw_root=str(raw_root))
    config["dataset"]["synthetic"] = {"enabled": False}
    return config


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


@pytest.mark.parametrize("case", END_TO_END, ids=END_TO_END)
def test_an_overlapping_work_dir_is_refused_before_any_job(tmp_path: Path, case: str) -> None:
    build, words, names_raw = OVERLAPS[case]
    tree = tmp_path / "tree"
    work, raw = build(tree)
    before = checksums(tree)
    assert before  # the decoy exists
    result = snakemake(tmp_path, _real(tiny_config(work), raw), "-n", check=False)
    shown = [work, raw] if names_raw else [work]
    _refusal(result, words, *shown)
    assert checksums(tree) == before
    for name in ("preprocessed", "results", "logs", "predictions"):
        assert not (tree / "X" / name / "Dataset900_Synth.partial").exists()
    assert not (work / "logs").exists() or work == tree / "X"


def test_a_paper_run_with_one_overlapping_dataset_is_refused(tmp_path: Path) -> None:
    """Several datasets: every run's config is checked (each run module's common.smk)."""
    tree = tmp_path / "tree"
    work, raw = raw_in_preprocessed(tree)
    before = checksums(tree)
    config = tiny_config(work)
    synthetic = config.pop("dataset")["synthetic"]
    del config["seed"]
    config["datasets"] = [
        {"id": 901, "name": "Fine", "synthetic": synthetic},
        {"id": 900, "name": "Synth", "raw_root": str(raw), "synthetic": {"enabled": False}},
    ]
    result = snakemake(tmp_path, config, "-n", check=False)
    _refusal(result, "inside preprocessed/", work, raw)
    assert checksums(tree) == before
