"""``benchmarks/gpu_check.sh --dry-run``: the GPU check's every code path, on the CPU, in CI.

The script is what a GPU machine runs unattended with no second chance, so this runs it exactly as
there (the shell wrapper, a subprocess) and requires a measured, positive, finite figure from every
section: a section that crashed, was stubbed out or ran past its budget leaves a row without a
value and fails here. Upstream's rows may instead be skipped with a reason where nnunetv2 is not
importable; with the peer venv present they are measured too.

The real-size sections (real_data, real_step, real_busy, real_predict) run here at tiny sizes:
tiny synthetic volumes, the shipped real-size plans' network cut small, 1-3 loader workers instead
of 4-12, the prediction without worker processes (test_gpu_realscale_profile.py checks the GPU's
sizes and plans). Their CUDA-only lines (synchronising, ``torch.cuda`` peak memory, AMP, pinned
batches on upstream's side) are exercised only on a GPU machine; here the peak-memory rows are the
CPU's maximum RSS.

Issue 50's GPU paths run here as on the GPU, with the CPU standing in where CUDA would be: the
out-of-memory fallback with the CPU as the "device" (its memory rows say n/a), the prediction
jobs' slots on a pretend GPU, the folds' slots under an exported pretend pool "0,1", and the
cuDNN rows timing the CPU step.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks.gpu.context import TINY_REAL, make_profile
from tests.helpers.peer import HAS_PEER, PEER_BIN

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

GPU_PATHS = ("oom_fallback", "predict_slots", "visible_devices", "cudnn")  # issue 50
SECTIONS = ("train", "loader", "folds", "predict", "compile", "ddp",
            "real_data", "real_step", "real_busy", "real_predict", *GPU_PATHS,
            "new_scans")  # fmt: skip
DRY_RUN = make_profile(True, "cpu")  # the dry run's sizes: folds 1 and 2 at once
WORKERS = TINY_REAL.workers  # the GPU's 4, 8, 12: test_gpu_realscale_profile.py
# what each section must have measured (a prefix of the row's "what")
REQUIRED = {
    "train": ["ours 2d step", "ours 3d_fullres step"],
    "loader": [
        "ours 2d batches",
        "2d GPU wait",
        "ours 3d_fullres batches",
        "3d_fullres GPU wait",
    ],
    "folds": [
        f"{n} fold{'s' if n > 1 else ''}: {k}"
        for n in DRY_RUN.fold_counts
        for k in ("total", "per fold", "peak memory")
    ],  # fmt: skip
    "predict": ["3d_fullres mirroring off", "3d_fullres mirroring on"],
    "compile": ["3d_fullres step, compile off", "3d_fullres step, compile on"],
    "ddp": ["3d_fullres DDP step"],
    "real_data": ["MR-like set: make", "CT-like case: make"],
    "real_step": ["ours 3d_fullres real-patch step", "ours real-patch peak memory"],
    "real_busy": [f"ours GPU busy, {w} workers" for w in WORKERS],
    "real_predict": ["ours case, mirroring off", "ours case, mirroring on"],
    "oom_fallback": ["normal: time", "fallback: time", "outputs: argmax agreement"],
    "predict_slots": ["second job's wait", "second job's slot after the first's"],
    "new_scans": ["shard job: wall", "shard job: cases per hour", "shard job: GPU busy"],
    "cudnn": [
        "step, benchmark off",
        "step, benchmark on",
        "first step, benchmark on",
        "speed-up of benchmark on",
        "step, deterministic",
    ],
}
# rows of device memory (CUDA's counters): on the CPU they say so instead of a value
MEMORY_ROWS = ["normal: peak memory", "forced OOM: peak at the fault",
               "retry start: memory held", "retry: peak memory"]  # fmt: skip
# upstream's rows: measured with the peer, else skipped with a reason
UPSTREAM = {
    "train": ["upstream 2d step", "upstream 3d_fullres step"],
    "real_step": ["upstream 3d_fullres real-patch step"],
    "real_busy": [f"upstream GPU busy, {w} workers" for w in WORKERS],
    "real_predict": ["upstream case, mirroring off", "upstream case, mirroring on"],
}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("gpu_check") / "table.json"
    command = ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--out", str(out)]
    if HAS_PEER:
        command += ["--peer", str(PEER_BIN.parent)]
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text())


def rows_of(table: dict) -> dict[tuple[str, str], dict]:
    return {(r["section"], r["what"]): r for r in table["rows"]}


def test_every_section_measured_a_positive_finite_value(dry_run: tuple[str, dict]) -> None:
    _, table = dry_run
    rows = rows_of(table)
    assert table["dry_run"] is True and table["device"] == "cpu"
    for section, names in REQUIRED.items():
        for what in names:
            row = rows.get((section, what))
            assert row is not None, f"{section}/{what} missing: {table['rows']}"
            value = row["value"]
            assert value is not None, f"{section}/{what} has no value: {row['note']}"
            assert math.isfinite(value), row
            if "GPU wait" in what:  # a fraction of the iteration: 0 when the loader keeps up
                assert 0 <= value <= 1, row
            elif "GPU busy" in what:  # compute / wall (new_scans: network / job seconds)
                assert 0 < value <= 1, row
            else:
                assert value > 0, row


def test_upstream_rows_are_measured_or_skipped_with_a_reason(dry_run: tuple[str, dict]) -> None:
    _, table = dry_run
    rows = rows_of(table)
    for section, names in UPSTREAM.items():
        for what in names:
            check_upstream_row(rows[(section, what)])


def check_upstream_row(row: dict) -> None:
    if HAS_PEER:
        assert row["value"] is not None and row["value"] > 0, row
        assert "nnunetv2 2.8" in row["note"], row
        if "GPU busy" in row["what"]:
            assert row["value"] <= 1, row
    else:
        assert row["value"] is None and row["note"].startswith("skipped: "), row


def test_rows_are_consistent_and_units_make_sense(dry_run: tuple[str, dict]) -> None:
    _, table = dry_run
    rows = rows_of(table)
    assert {r["section"] for r in table["rows"]} == set(SECTIONS)
    most = max(DRY_RUN.fold_counts)
    assert rows[("folds", f"{most} folds: total")]["unit"] == "it/s"
    total = rows[("folds", f"{most} folds: total")]["value"]
    per_fold = rows[("folds", f"{most} folds: per fold")]["value"]
    assert total == pytest.approx(most * per_fold)
    off = rows[("predict", "3d_fullres mirroring off")]["value"]
    on = rows[("predict", "3d_fullres mirroring on")]["value"]
    assert on > off, "eight mirrored passes cannot be faster than one"
    assert "backend gloo" in rows[("ddp", "3d_fullres DDP step")]["note"]
    # the real-size step ran at the plan's patch and batch (here the dry run's cut network)
    step = rows[("real_step", "ours 3d_fullres real-patch step")]
    assert "batch x patch [2, " in step["note"], step
    planned = rows[("real_data", "MR-like set: make")]["note"]
    assert "patch [" in planned and "batch 2" in planned, planned
    assert "export included" in rows[("real_predict", "ours case, mirroring off")]["note"]


def test_printed_table_matches_the_json(dry_run: tuple[str, dict]) -> None:
    stdout, table = dry_run
    from benchmarks.gpu.check import TABLE_END, TABLE_START, format_value

    printed = stdout.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip().splitlines()
    body = printed[2:]  # header and rule
    assert len(body) == len(table["rows"])
    for line, row in zip(body, table["rows"], strict=True):
        cells = line.split()
        assert cells[0] == row["section"], (line, row)
        assert f"  {row['what']}  " in line, (line, row)
        assert format_value(row["value"]) in line.split(row["what"], 1)[1].split(), (line, row)
        if row["note"]:
            assert line.endswith(row["note"]), (line, row)


def test_issue_50_gpu_paths_ran_their_paths_on_the_cpu(dry_run: tuple[str, dict]) -> None:
    _, table = dry_run
    rows = rows_of(table)
    ours = [r for r in table["rows"] if r["section"] in GPU_PATHS]
    assert not [r for r in ours if r["value"] is None and not r["note"].startswith("n/a on CPU")]
    # the forced fallback happened (two attempts, its log line) and changed no number
    fallback = rows[("oom_fallback", "fallback: time")]["note"]
    assert "attempts: cpu then cpu" in fallback and "logged: yes" in fallback, fallback
    assert rows[("oom_fallback", "outputs: max abs difference")]["value"] == 0
    assert rows[("oom_fallback", "outputs: argmax agreement")]["value"] == 1
    for what in MEMORY_ROWS:
        row = rows[("oom_fallback", what)]
        assert row["value"] is None and row["note"].startswith("n/a on CPU"), row
    # one pretend GPU: both prediction jobs get it, the second only once the first let it go
    jobs = [rows[("predict_slots", f"job {i}: GPU")] for i in (0, 1)]
    assert [j["value"] for j in jobs] == [0, 0], jobs
    assert "serialised on 0" in rows[("predict_slots", "second job's wait")]["note"]
    assert rows[("predict_slots", "second job's slot after the first's")]["value"] >= 1.0
    # an exported pool of two: the folds take one entry each
    folds = [rows[("visible_devices", f"fold {i}: GPU")] for i in (0, 1)]
    assert sorted(f["value"] for f in folds) == [0, 1], folds
    assert "CUDA_VISIBLE_DEVICES=0,1" in rows[("visible_devices", "second fold's wait")]["note"]
    for i in (0, 1):
        device = rows[("visible_devices", f"fold {i}: torch device")]
        assert device["note"] == "n/a on CPU (no CUDA)", device
