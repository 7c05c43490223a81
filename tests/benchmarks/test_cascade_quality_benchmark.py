"""The pure parts of benchmarks/quality/cascade_quality.py: the per-stage table and the 0.02
verdict."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.quality import cascade_quality as cq

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


def write_fold_summaries(results, stage: str, cases_per_fold: list[list[tuple]]) -> None:
    """A stage's five validation ``summary.json`` files as the trainers write them; a case is
    (lesion reference voxels, lesion predicted voxels, lesion Dice), organ always 0.9."""
    for fold, cases in enumerate(cases_per_fold):
        per_case = [{"metrics": {"1": {"n_ref": 50, "n_pred": 50, "Dice": 0.9},
                                 "2": {"n_ref": ref, "n_pred": pred, "Dice": dice}}}
                    for ref, pred, dice in cases]  # fmt: skip
        lesion = [c[2] for c in cases if not (c[0] == 0 and c[1] == 0)]
        mean = {"1": {"Dice": 0.9}, "2": {"Dice": sum(lesion) / len(lesion)}}
        folder = results / "Dataset953_X" / f"T__P__{stage}" / f"fold_{fold}" / "validation"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(
            json.dumps({"mean": mean, "metric_per_case": per_case})
        )


def test_presence_split_is_filled_from_the_runs_folder_and_shown(tmp_path) -> None:
    """A record without the split gets it from its run's five fold summaries, but only when
    they still give the recorded Dice; the table shows Dice where present and stray voxels."""
    ok = [[(10, 10, 0.8)], [(10, 10, 0.8)], [(10, 10, 0.8)], [(0, 7, 0.0)], [(10, 10, 0.8)]]
    for side in ("ours", "upstream"):
        results = tmp_path / side / "run0" / "results"
        for stage in cq.STAGES:
            write_fold_summaries(results, stage, ok)
    args = argparse.Namespace(work=tmp_path)
    records = [record("ours", 0, 0.9, 0.9), record("upstream", 0, 0.9, 0.9)]
    for r in records:
        r["3d_lowres"]["2"] = r["3d_cascade_fullres"]["2"] = 0.64  # (0.8 * 4 + 0) / 5
    records[1]["3d_cascade_fullres"]["2"] = 0.7  # not what its folder gives: left alone
    cq.fill_presence(args, records)
    assert records[0]["by_presence"]["3d_cascade_fullres"]["2"] == {
        "dice_where_present": pytest.approx(0.8),
        "false_voxels": 7,
        "cases_without": 1,
    }
    assert "by_presence" not in records[1]
    rows = {(r["stage"], r["class"]): r for r in cq.summary_rows(records)}
    lesion = rows[("3d_lowres", "2")]
    assert lesion["ours"]["dice_where_present"]["mean"] == pytest.approx(0.8)
    assert lesion["ours"]["false_voxels"] == [7] and lesion["upstream"]["false_voxels"] == []
    assert "[7] / []" in cq.format_rows(cq.summary_rows(records))
