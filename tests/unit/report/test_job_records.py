"""Run times of every job kind: Snakemake's own per-output records (``.snakemake/metadata``) of a
real Snakemake run give each job's start and end, found by the run's log folders.

A three-rule workflow (one job writes two outputs, one logs outside the run's folder) runs for
real; the rows must be its two jobs whose logs lie in ``logs/D``, once each, with their times,
and the report's run-time figure gets one bar per row.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from nnunet_core.report import figures
from nnunet_core.report.runtimes import run_times_frame, snakemake_record_rows

SNAKEFILE = """\
rule all:
    input:
        "out/plan.json",
        "out/a.txt",
        "out/b.txt",
        "other/x.txt",


rule plan:
    output:
        "out/plan.json",
    log:
        "logs/D/plan.log",
    shell:
        "sleep 1; echo {{}} > {output}; echo planned > {log}"


rule predict:
    output:
        "out/a.txt",
        "out/b.txt",
    log:
        "logs/D/predict_3d_fullres.log",
    shell:
        "touch {output}; echo predicted > {log}"


rule elsewhere:
    output:
        "other/x.txt",
    log:
        "logs/E/elsewhere.log",
    shell:
        "touch {output} {log}"
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("records")
    (folder / "Snakefile").write_text(SNAKEFILE)
    snakemake = Path(sys.executable).with_name("snakemake")
    result = subprocess.run(
        [str(snakemake), "--cores", "1", "--quiet", "all"],
        cwd=folder, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return folder


def test_every_job_of_the_run_once_with_its_times(workdir: Path) -> None:
    started = time.time()
    rows = snakemake_record_rows(workdir / ".snakemake" / "metadata", [workdir / "logs" / "D"])
    by_job = {r["job"]: r for r in rows}
    assert len(rows) == len(by_job)  # a job with two outputs once
    assert sorted(by_job) == ["plan", "predict: predict_3d_fullres"]  # not the logs/E job
    assert by_job["plan"]["seconds"] >= 1.0 and by_job["plan"]["stage"] == "plan"
    for row in rows:
        assert row["end"] >= row["start"]
        assert started - 600 < row["end"].timestamp() <= started + 1


def test_a_relative_log_folder_and_the_figure(workdir: Path, monkeypatch) -> None:
    monkeypatch.chdir(workdir)  # as the report rule runs: in the workflow's folder
    rows = snakemake_record_rows(Path(".snakemake/metadata"), [Path("logs/D")])
    assert len(rows) == 2
    figure_path = figures.run_times(run_times_frame(rows), workdir / "run_times.png")
    assert figure_path.stat().st_size > 0
    assert set(pd.DataFrame(rows)["source"]) == {"snakemake records"}
