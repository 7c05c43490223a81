"""The workflow's check of the raw dataset before its first job: run where the verify_dataset job
would run (no report, or one that no longer covers the raw files), and only there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core.errors import DatasetError
from nnunet_core.layout.preprocessed import VERIFY_JSON
from nnunet_core.layout.raw import LABELS_TR
from nnunet_core.layout.roots import Roots
from nnunet_core.workflow.dataset_check import check_before_jobs, recheck_reason
from nnunet_core.workflow.inputs import raw_training_files
from nnunet_core.workflow.work_lock import WorkDirLockedError

DATASET = "Dataset900_Synth"


@pytest.fixture
def unchecked(make_raw_dataset, tmp_path) -> tuple[Roots, Path, Path]:
    """A clean raw dataset without a report: (roots, raw folder, report path)."""
    raw = make_raw_dataset(tmp_path / "raw" / DATASET, num_training=3, num_test=1)
    roots = Roots(raw=tmp_path / "raw", preprocessed=tmp_path / "pre")
    report = tmp_path / "pre" / DATASET / VERIFY_JSON
    report.parent.mkdir(parents=True)
    return roots, raw, report


@pytest.fixture
def checked(unchecked) -> tuple[Roots, Path, Path]:
    """``unchecked``, checked once."""
    roots, raw, report = unchecked
    assert check_before_jobs(roots, DATASET, report, _inputs(raw), 1)
    return unchecked


def _inputs(raw: Path) -> list[Path]:
    return raw_training_files(raw, raw / "dataset.json")


def test_a_clean_dataset_gets_its_report_once(unchecked, capsys) -> None:
    roots, raw, report = unchecked
    assert recheck_reason(report, raw, _inputs(raw)) == "no report yet"
    assert check_before_jobs(roots, DATASET, report, _inputs(raw), 1)
    assert json.loads(report.read_text())["cases_checked"] == 3
    assert "3 case(s) + 1 test case(s) OK" in capsys.readouterr().out
    assert recheck_reason(report, raw, _inputs(raw)) is None
    assert not check_before_jobs(roots, DATASET, report, _inputs(raw), 1)  # nothing to do
    assert capsys.readouterr().out == ""


def test_a_newer_raw_file_or_a_removed_one_checks_again(checked) -> None:
    _, raw, report = checked
    image = sorted((raw / "imagesTr").iterdir())[1]
    later = report.stat().st_mtime + 5
    os.utime(image, (later, later))
    assert recheck_reason(report, raw, _inputs(raw)) == "a raw file is newer than the report"
    os.utime(report, (later + 5, later + 5))  # the report newer again, the manifest stale
    assert "changed since the report" in recheck_reason(report, raw, _inputs(raw))
    report.unlink()
    assert recheck_reason(report, raw, _inputs(raw)) == "no report yet"


def test_a_report_of_another_version_is_left_alone(checked) -> None:
    """Snakemake does not rerun the job for it; checking again would rerun what follows."""
    _, raw, report = checked
    record = json.loads(report.read_text())
    record["nnunet_core_version"] = "0.0.1"
    written = report.stat().st_mtime
    report.write_text(json.dumps(record))
    os.utime(report, (written, written))
    assert recheck_reason(report, raw, _inputs(raw)) is None


def test_a_broken_dataset_is_its_lines_and_leaves_no_report(checked, capsys) -> None:
    roots, raw, report = checked
    (raw / LABELS_TR / "synth_001.nii.gz").unlink()
    with pytest.raises(DatasetError) as info:
        check_before_jobs(roots, DATASET, report, _inputs(raw), 1)
    assert str(info.value).startswith("nnunet-core verify: error: "), info.value
    assert "synth_001" in str(info.value)
    assert not report.exists()
    assert capsys.readouterr().out.count("case ") == 0  # no progress lines


def test_a_workflow_running_on_the_work_dir_keeps_its_report(checked, tmp_path) -> None:
    """Another process holds the work_dir lock: the check stops in one line before it removes
    or rewrites that workflow's report."""
    roots, raw, report = checked
    work = tmp_path / "work"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(work)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = report.read_bytes()
        (raw / LABELS_TR / "synth_001.nii.gz").unlink()  # broken: the check would remove it
        with pytest.raises(WorkDirLockedError, match="is in use by another workflow"):
            check_before_jobs(roots, DATASET, report, _inputs(raw), 1, work_dir=work)
        assert report.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()


HOLD_LOCK = """
import sys, time
from nnunet_core.workflow import work_lock
work_lock.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""
