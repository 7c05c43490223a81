"""The pure parts of benchmarks/cascade_quality.py: the per-stage table and the 0.02 verdict."""

from __future__ import annotations

import pytest
from benchmark_modules import load_benchmark

cq = load_benchmark("cascade_quality")
SCHEDULE = {"epochs": 5, "iterations": 10, "val_iterations": 3}


def record(side: str, run: int, lowres: float, cascade: float) -> dict:
    return {
        "side": side,
        "run": run,
        "schedule": SCHEDULE,
        "3d_lowres": {"1": lowres, "2": lowres - 0.1},
        "3d_cascade_fullres": {"1": cascade, "2": cascade - 0.1},
    }


def test_rows_give_each_sides_mean_and_spread_and_the_difference() -> None:
    records = [
        record("ours", 0, 0.90, 0.93),
        record("ours", 1, 0.92, 0.95),
        record("upstream", 0, 0.91, 0.90),
        record("upstream", 1, 0.91, 0.92),
    ]
    rows = {(r["stage"], r["class"]): r for r in cq.summary_rows(records)}
    assert set(rows) == {(s, c) for s in cq.STAGES for c in ("1", "2")}
    organ = rows[("3d_cascade_fullres", "1")]
    assert organ["ours"]["mean"] == pytest.approx(0.94)
    assert organ["ours"]["sd"] == pytest.approx(0.0141421, abs=1e-6)
    assert organ["upstream"]["values"] == [0.9, 0.92]
    assert organ["ours_minus_upstream"] == pytest.approx(0.03)
    assert organ["within_tolerance"] is False  # 0.03 > 0.02
    assert rows[("3d_lowres", "1")]["within_tolerance"] is True
    table = cq.format_rows(cq.summary_rows(records))
    assert "+0.0300" in table and "0.9400 ± 0.0141 (n=2)" in table


def test_one_side_only_has_no_verdict() -> None:
    rows = cq.summary_rows([record("ours", 0, 0.9, 0.9)])
    assert all("within_tolerance" not in r and r["upstream"]["n"] == 0 for r in rows)
    assert all(r["ours"]["sd"] is None for r in rows)
