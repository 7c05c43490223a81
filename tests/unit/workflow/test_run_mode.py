"""The dataset check before any job is skipped where Snakemake runs no job (``--unlock`` ...)."""

from __future__ import annotations

import pytest

from nnunet_core.workflow.run_mode import runs_jobs


@pytest.mark.parametrize(
    "argv",
    [
        ["--cores", "8", "--unlock"],
        ["--dag"],
        ["--lint"],
        ["--report=report.html"],
        ["--list-changes", "params"],
        ["--touch"],
    ],
)
def test_questions_and_the_unlock_run_no_job(argv: list[str]) -> None:
    assert not runs_jobs(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--cores", "8", "--config", "dataset={id: 4}"],
        ["--profile", "profiles/slurm", "all"],
        ["--cores", "2", "--rerun-incomplete", "trained"],
        ["-n", "4", "-v"],  # pytest's own flags, when a test reads the workflow in-process
    ],
)
def test_a_run_runs_jobs(argv: list[str]) -> None:
    assert runs_jobs(argv)
