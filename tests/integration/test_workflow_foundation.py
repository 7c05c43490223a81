"""Real Snakemake runs of the workflow on a tiny synthetic dataset.

Checks what a user relies on: the dry run shows the DAG, a run produces the preprocessed data, a
second run has nothing to do, touching one raw image reruns only what depends on it, and a broken
dataset stops the run at the integrity check with a one-line message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.workflow import DATASET, REPO, job_counts, tiny_config
from tests.helpers.workflow import snakemake as snakemake_target

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, config: dict, *extra: str, check: bool = True):
    """The workflow up to the stage target `preprocessed` (what these tests cover)."""
    return snakemake_target(workdir, config, "preprocessed", *extra, check=check)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workflow")
    config = tiny_config(workdir / "work")
    result = snakemake(workdir, config)
    return workdir, config, result


def test_dry_run_prints_the_dag(tmp_path) -> None:
    result = snakemake(tmp_path, tiny_config(tmp_path / "work"), "-n")
    counts = job_counts(result.stdout + result.stderr)
    for rule in ("synthesize_dataset", "verify_dataset", "fingerprint", "plan", "splits"):
        assert counts.get(rule) == 1, counts
    assert not (tmp_path / "work").exists(), "a dry run must not write anything"


def test_run_produces_preprocessed_data(finished_run) -> None:
    workdir, _, result = finished_run
    pre = workdir / "work" / "preprocessed" / DATASET
    plans = json.loads((pre / "nnUNetPlans.json").read_text())
    assert {"2d", "3d_fullres"} <= set(plans["configurations"])
    cases = sorted(
        p.name.removesuffix(".nii.gz")
        for p in (workdir / "work/raw" / DATASET / "labelsTr").iterdir()
    )
    assert len(cases) == 6
    for identifier in ("nnUNetPlans_2d", "nnUNetPlans_3d_fullres"):
        folder = pre / identifier
        summary = json.loads((folder / "preprocess_summary.json").read_text())
        assert sorted(summary["cases"]) == cases
        for case in cases:
            for name in (f"{case}.b2nd", f"{case}_seg.b2nd", f"{case}.json"):
                assert (folder / name).is_file(), folder / name
    splits = json.loads((pre / "splits_final.json").read_text())
    assert sorted(c for s in splits for c in s["val"]) == cases
    for rule in ("verify_dataset", "fingerprint", "plan", "splits", "preprocess"):
        assert list((workdir / "work" / "logs" / DATASET).glob(f"{rule}*.log")), rule


def test_second_run_has_nothing_to_do(finished_run) -> None:
    workdir, config, _ = finished_run
    result = snakemake(workdir, config)
    assert "Nothing to be done" in result.stdout + result.stderr


def test_touching_one_image_reruns_only_its_dependants(finished_run) -> None:
    workdir, config, _ = finished_run
    image = sorted((workdir / "work/raw" / DATASET / "imagesTr").iterdir())[2]
    os.utime(image)
    result = snakemake(workdir, config)
    counts = job_counts(result.stdout + result.stderr)
    assert counts == {
        "verify_dataset": 1,
        "fingerprint": 1,
        "plan": 1,
        "preprocess": 2,
        "preprocessed": 1,
    }
    again = snakemake(workdir, config)
    assert "Nothing to be done" in again.stdout + again.stderr


def test_broken_dataset_stops_at_the_integrity_check(tmp_path, finished_run) -> None:
    workdir, _, _ = finished_run
    raw_root = tmp_path / "raw"
    shutil.copytree(workdir / "work/raw" / DATASET, raw_root / DATASET)
    label = raw_root / DATASET / "labelsTr" / "synth_001.nii.gz"
    assert label.is_file()
    label.unlink()
    config = tiny_config(tmp_path / "work", raw_root=str(raw_root))
    config["dataset"]["synthetic"]["enabled"] = False
    result = snakemake(tmp_path, config, check=False)
    assert result.returncode != 0
    log = (tmp_path / "work/logs" / DATASET / "verify_dataset.log").read_text()
    error_lines = [line for line in log.splitlines() if "error" in line]
    assert error_lines and "synth_001" in error_lines[0]
    pre = tmp_path / "work/preprocessed" / DATASET
    assert not (pre / "verify.json").exists()
    assert not (pre / "dataset_fingerprint.json").exists()


def test_unknown_config_key_is_one_clear_line(tmp_path) -> None:
    config = tiny_config(tmp_path / "work")
    config["planning"]["bogus_key"] = 3
    result = snakemake(tmp_path, config, "-n", check=False)
    assert result.returncode != 0
    assert "planning.bogus_key: unknown key" in result.stdout + result.stderr


def test_lint_and_format_are_clean() -> None:
    bin_dir = Path(sys.executable).parent
    fmt = subprocess.run(
        [str(bin_dir / "snakefmt"), "--check", "Snakefile", "workflow"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert fmt.returncode == 0, fmt.stderr
    lint = subprocess.run(
        [str(bin_dir / "snakemake"), "--lint"], cwd=REPO, capture_output=True, text=True
    )
    lints = [
        line.strip()
        for line in (lint.stdout + lint.stderr).splitlines()
        if line.strip().startswith("* ")
    ]
    assert lints, "expected the documented conda/container lint"
    assert all(line.startswith("* Specify a conda environment or container") for line in lints), (
        lints
    )
