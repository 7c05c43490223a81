"""The pure parts of benchmarks/speed/realscale/: the record's shape and ratios, the workers
needed per GPU step, the table, and the argument errors a user sees (seconds, nothing measured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.speed.realscale.record import (
    absent_stage,
    format_table,
    make_record,
    stage_entry,
    workers_needed,
    write_record,
)

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"ours_s", "upstream_s", "ratio", "ours_peak_mb", "upstream_peak_mb"}


def test_ratio_is_ours_over_upstream_and_null_without_upstream():
    entry = stage_entry(2.0, 8.0, 500.0, 1500.0)
    assert entry == {
        "ours_s": 2.0,
        "upstream_s": 8.0,
        "ratio": 0.25,
        "ours_peak_mb": 500.0,
        "upstream_peak_mb": 1500.0,
    }
    alone = stage_entry(2.0, None, 500.0, None, note="no peer")
    assert alone["ratio"] is None and alone["upstream_s"] is None and alone["note"] == "no peer"
    missing = absent_stage("benchmarks.speed.realscale.predict is not in this checkout")
    assert set(missing) == REQUIRED | {"note"}
    assert all(missing[k] is None for k in REQUIRED) and missing["note"].startswith("absent: ")


@pytest.mark.parametrize(
    ("seconds", "workers"),
    [(0.05, [1, 1, 1]), (0.1, [1, 1, 1]), (0.25, [3, 2, 1]), (1.02, [11, 6, 3]), (0.3, [3, 2, 1])],
)
def test_workers_needed_is_the_ceiling_of_seconds_per_batch_over_the_step(seconds, workers):
    assert workers_needed(seconds) == workers


def test_workers_needed_refuses_a_zero_time():
    with pytest.raises(ValueError, match="positive"):
        workers_needed(0.0)


def test_record_has_the_issue_shape_reads_back_as_plain_json_and_tables(tmp_path):
    stages = {
        "preprocess": stage_entry(30.0, 120.0, 800.0, 2400.0, note="2 cases"),
        "loader_3d_fullres": stage_entry(0.9, 1.8, 700.0, 900.0),
        "loader_2d": stage_entry(0.05, None, 300.0, None),
        "predict_case": absent_stage("--skip-predict"),
    }
    record = make_record("box: cpu, 2 cores", "abc123", "synthetic", stages, quick=True)
    out = tmp_path / "deep" / "r.json"
    write_record(out, record)
    read = json.loads(out.read_text())
    assert list(read)[:4] == ["machine", "commit", "dataset", "stages"]
    assert read["machine"] == "box: cpu, 2 cores" and read["commit"] == "abc123"
    assert read["quick"] is True
    for entry in read["stages"].values():
        assert REQUIRED <= set(entry)
    assert read["stages"]["preprocess"]["ratio"] == 0.25
    assert read["stages"]["loader_3d_fullres"]["ratio"] == 0.5
    assert read["workers_needed"]["stages"]["loader_3d_fullres"] == {
        "ours": [9, 5, 3],
        "upstream": [18, 9, 5],
    }
    assert read["workers_needed"]["stages"]["loader_2d"] == {"ours": [1, 1, 1], "upstream": None}
    assert "predict_case" not in read["workers_needed"]["stages"]
    table = format_table(read)
    row = next(line for line in table.splitlines() if line.startswith("loader_3d_fullres "))
    assert row.split() == ["loader_3d_fullres", "0.900", "1.800", "0.50", "700", "900"]
    assert "9/5/3 | 18/9/5" in table and "absent: --skip-predict" in table
    assert not list(out.parent.glob("*.tmp*")), "a temporary file was left beside the record"


def test_a_stage_without_the_required_keys_is_refused():
    with pytest.raises(ValueError, match="stage loader_2d: missing ratio"):
        entry = {"ours_s": 1.0, "upstream_s": 1.0, "ours_peak_mb": 1.0, "upstream_peak_mb": 1.0}
        make_record("m", "c", "d", {"loader_2d": entry})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--peer", "{tmp}"], "no bin/python (not an upstream nnU-Net venv)"),
        (["--dataset", "{tmp}"], "no dataset.json (not an nnU-Net raw dataset)"),
        (["--out", "{tmp}"], "is a folder, give a file name"),
        (["-np", "0"], "-np must be at least 1"),
    ],
)
def test_bad_arguments_fail_with_one_line_and_write_nothing(tmp_path, args, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    before = set(tmp_path.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed.realscale", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert message in done.stderr.strip().splitlines()[-1]
    assert set(tmp_path.iterdir()) == before
