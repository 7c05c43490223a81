"""The pure parts of benchmarks/quality/quality.py: pseudo Dice parsing of both logs, statistics,
verdicts.

The logs in tests/data/quality/ are lines recorded from a 2-epoch run of each side on the same
synthetic 2-D set (upstream's numpy >= 2 prints ``np.float32(...)`` and a trailing space).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.quality import quality_stats as qs

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "quality"


def test_parses_upstream_log_with_numpy_scalars():
    lines = (DATA / "upstream_training_log.txt").read_text().splitlines()
    assert qs.parse_pseudo_dice(lines) == [[0.524, 0.0413], [0.666, 0.0531]]


def test_parses_our_log_and_ignores_our_eta_lines():
    lines = (DATA / "ours_training_log.txt").read_text().splitlines()
    assert qs.parse_pseudo_dice(lines) == [[0.3509, 0.0403], [0.6353, 0.0257]]


def test_nan_and_restarted_epochs():
    lines = [
        "2026-01-01 10:00:00: Epoch 0",
        "2026-01-01 10:00:01: Pseudo dice [np.float32(0.2), np.float32(nan)]",
        "2026-01-01 10:00:02: Epoch 1",
        "2026-01-01 10:00:03: Pseudo dice [0.4, 0.1]",
        "2026-01-01 11:00:00: Epoch 1",  # continued from checkpoint_latest: epoch 1 again
        "2026-01-01 11:00:01: Pseudo dice [0.6, 0.7]",
    ]
    curve = qs.parse_pseudo_dice(lines)
    assert curve[0][0] == 0.2 and math.isnan(curve[0][1])
    assert curve[1] == [0.6, 0.7]


def test_learned_epochs_first_pass_of_threshold_or_never():
    curve = [[0.3, math.nan], [0.5, 0.2], [0.51, 0.4], [0.9, 0.45]]
    assert qs.learned_epochs(curve) == [2, None]
    assert qs.learned_epochs([]) == []


def test_describe_uses_sample_sd_and_drops_nan():
    stats = qs.describe([0.9, 0.8, math.nan, 1.0])
    assert stats["n"] == 3
    assert stats["mean"] == pytest.approx(0.9)
    assert stats["sd"] == pytest.approx(0.1)  # ddof=1
    assert stats["min"] == 0.8
    assert qs.describe([0.5])["sd"] is None


def test_verdict_targets():
    upstream = {"mean": 0.90, "sd": 0.02}
    assert qs.verdict({"mean": 0.891, "sd": 0.02}, upstream)["mean_ok"] is True
    assert qs.verdict({"mean": 0.889, "sd": 0.01}, upstream)["mean_ok"] is False
    assert qs.verdict({"mean": 0.95, "sd": 0.03}, upstream)["sd_ok"] is False
    assert qs.verdict({"mean": 0.95, "sd": None}, upstream)["sd_ok"] is None


def test_summarise_and_table():
    runs = [
        {"side": "ours", "test_dice": {"1": 0.98, "2": 0.9}, "learned": [1, 3]},
        {"side": "ours", "test_dice": {"1": 0.97, "2": 0.0}, "learned": [1, None]},
        {"side": "upstream", "test_dice": {"1": 0.98, "2": 0.92}, "learned": [2, 4]},
        {"side": "upstream", "test_dice": {"1": 0.98, "2": 0.94}, "learned": [1, 5]},
    ]
    rows = qs.summarise(runs, {"2": "lesion", "1": "organ"})
    assert [r["class"] for r in rows] == ["organ", "lesion"]
    lesion = rows[1]
    assert lesion["ours"]["mean"] == pytest.approx(0.45)
    assert lesion["mean_ok"] is False and lesion["sd_ok"] is False
    assert lesion["ours"]["learned"] == {
        "learned": 1,
        "runs": 2,
        "median_epoch": 3,
        "epochs": [3, None],
    }
    assert lesion["upstream"]["learned"]["median_epoch"] == 4.5
    table = qs.format_table("set 2d", rows)
    assert "lesion" in table and "FAIL" in table and "1/2 @ 3" in table


def test_learning_tests_tell_less_often_and_later_from_chance():
    def side(epochs):
        return qs.describe_learned(epochs)

    # 8 of 8 runs at epoch 1 against 0 of 8: both tests see it
    apart = qs.learning_tests(side([1] * 8), side([None] * 8), epochs=6)
    assert apart["learned_p"] < 0.001 and apart["learned_epoch_p"] < 0.001
    # all learned, ours two epochs later in every run: not less often, but later
    later = qs.learning_tests(side([3] * 8), side([1] * 8), epochs=6)
    assert later["learned_p"] == 1.0 and later["learned_epoch_p"] < 0.001
    # 3 of 4 against 4 of 4: nothing to tell; identical runs tie
    close = qs.learning_tests(side([2, 1, 3, None]), side([1, 1, 1, 2]), epochs=6)
    assert close["learned_p"] == 1.0 and close["learned_epoch_p"] > 0.05
    assert qs.learning_tests(side([1, 1]), side([1, 1]), epochs=4)["learned_epoch_p"] == 1.0
    pairs = [("ours", 1), ("ours", None), ("upstream", 1), ("upstream", 1)]
    runs = [{"side": s, "schedule": {"epochs": 6}, "test_dice": {"1": 0.9}, "learned": [e]}
            for s, e in pairs]  # fmt: skip
    (row,) = qs.summarise(runs, {"1": "lesion"})
    assert row["learned_p"] == 1.0
    assert "runs learned p 1.000" in qs.format_table("set 3d", [row])


def test_dice_tests_tell_a_shift_and_a_wider_spread():
    rng = np.random.default_rng(1)
    base = list(rng.normal(0.90, 0.01, 12))
    shifted = qs.dice_tests([v - 0.05 for v in base], list(rng.normal(0.90, 0.01, 12)))
    assert shifted["dice_p"] < 0.001 and shifted["spread_p"] > 0.01
    wide = qs.dice_tests(list(rng.normal(0.90, 0.1, 12)), base)
    assert wide["spread_p"] < 0.01
    # one all-or-nothing run a side: the spread is alike
    assert qs.dice_tests([0.93, 0.94, 0.0, 0.92], [0.92, 0.0, 0.93, 0.94])["spread_p"] > 0.5
    assert qs.dice_tests([0.9], [0.8, 0.7]) == {"dice_p": None, "spread_p": None}
    assert qs.dice_tests([0.9, 0.9], [0.9, 0.9]) == {"dice_p": None, "spread_p": None}
    assert qs.dice_tests([0.98, 0.97], [0.98, 0.98])["spread_p"] is None  # nothing to compare


def test_presence_split_tells_stray_voxels_from_a_worse_segmentation():
    """A case without the lesion scores 0 for one stray voxel (and is left out when nothing is
    predicted there): the split shows both the Dice where the lesion exists and those voxels."""

    def case(organ: tuple[int, int, float], lesion: tuple[int, int, float]) -> dict:
        pairs = (("1", organ), ("2", lesion))
        return {"metrics": {label: {"n_ref": n_ref, "n_pred": n_pred, "Dice": dice}
                            for label, (n_ref, n_pred, dice) in pairs}}  # fmt: skip

    nan = float("nan")
    strays = {"metric_per_case": [case((90, 92, 0.95), (10, 9, 0.9)),
                                  case((80, 81, 0.96), (0, 5, 0.0)),
                                  case((70, 70, 0.97), (0, 0, nan))]}  # fmt: skip
    split = qs.presence_split(strays)
    assert split["2"] == {"dice_where_present": 0.9, "false_voxels": 5, "cases_without": 2}
    assert split["1"]["dice_where_present"] == pytest.approx(0.96)
    assert split["1"]["false_voxels"] == 0 and split["1"]["cases_without"] == 0
    clean = {"metric_per_case": [case((90, 92, 0.95), (10, 9, 0.9)),
                                 case((80, 81, 0.96), (0, 0, nan))]}  # fmt: skip
    runs = [
        {"side": "ours", "test_dice": {"1": 0.96, "2": 0.45}, "learned": [0, 1],
         "by_presence": split},
        {"side": "upstream", "test_dice": {"1": 0.955, "2": 0.9}, "learned": [0, 1],
         "by_presence": qs.presence_split(clean)},
        {"side": "upstream", "test_dice": {"1": 0.95, "2": 0.9}, "learned": [0, 1]},  # older record
    ]  # fmt: skip
    lesion = qs.summarise(runs, {"1": "organ", "2": "lesion"})[1]
    assert lesion["mean_ok"] is False  # the headline Dice fails on the stray voxels ...
    assert lesion["ours"]["dice_where_present"]["mean"] == 0.9  # ... the segmentation does not
    assert lesion["ours"]["false_voxels"] == [5] and lesion["upstream"]["false_voxels"] == [0]
    table = qs.format_table("set 3d", qs.summarise(runs, {"1": "organ", "2": "lesion"}))
    assert "[5] / [0]" in table


def test_report_prints_every_recorded_schedule_without_the_raw_set(tmp_path):
    """``--report`` on a record from another machine: no schedule flags, no raw folder, no work
    written; each set and schedule in the record gets its table, labels named by value."""
    import json
    import subprocess
    import sys

    def record(side: str, epochs: int, lesion: float) -> dict:
        schedule = {"epochs": epochs, "iterations": 25, "val_iterations": 5}
        return {"set": "3d", "side": side, "run": 0, "schedule": schedule,
                "test_dice": {"1": 0.95, "2": lesion}, "learned": [0, 1],
                "folder": str(tmp_path / "gone")}  # fmt: skip

    runs = [record("ours", 4, 0.0), record("upstream", 4, 0.9), record("ours", 6, 0.91),
            record("upstream", 6, 0.9)]  # fmt: skip
    out = tmp_path / "quality.json"
    out.write_text(json.dumps({"command": "quality.py --seeds 1", "runs": runs}))
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.quality.quality", "--report", "--work",
         str(work), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    tables = done.stdout.split("set 3d, ")[1:]
    assert [t.split(" ")[0] for t in tables] == ["4x25v5", "6x25v5"]
    assert "label 2" in tables[0] and "FAIL" in tables[0] and "FAIL" not in tables[1]
    assert not work.exists()
    written = json.loads(out.read_text())
    assert written["command"] == "quality.py --seeds 1" and len(written["runs"]) == 4
    assert set(written["summary"]) == {"3d_4x25v5", "3d_6x25v5"}


def test_report_merges_a_second_process_records_once(tmp_path):
    """Two invocations side by side (``--start 2`` with its own ``--out``): ``--report --merge``
    adds the second file's runs to the first, a run both hold is kept once (the first's), and
    the second's command is kept beside the first's."""
    import json
    import subprocess
    import sys

    def record(side: str, run: int, lesion: float, epochs: int = 6) -> dict:
        schedule = {"epochs": epochs, "iterations": 25, "val_iterations": 5}
        return {"set": "3d", "side": side, "run": run, "schedule": schedule,
                "test_dice": {"1": 0.95, "2": lesion}, "learned": [0, 1],
                "folder": str(tmp_path / "gone")}  # fmt: skip

    first, second = tmp_path / "quality.json", tmp_path / "quality_from2.json"
    mine = [record("ours", 0, 0.9), record("upstream", 0, 0.9), record("ours", 1, 0.9),
            record("upstream", 1, 0.9), record("ours", 0, 0.5, epochs=4)]  # fmt: skip
    beside = [record("ours", 1, 0.1), record("ours", 2, 0.8), record("upstream", 2, 0.7)]
    first.write_text(json.dumps({"command": "quality.py --seeds 2", "runs": mine}))
    second.write_text(json.dumps({"command": "quality.py --start 1 --seeds 2", "runs": beside}))
    for _ in range(2):  # merging again adds nothing
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.quality.quality", "--report", "--work",
             str(tmp_path / "work"), "--out", str(first), "--merge", str(second)],
            cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    written = json.loads(first.read_text())
    runs = {(r["side"], r["run"], r["schedule"]["epochs"]): r["test_dice"]["2"]
            for r in written["runs"]}  # fmt: skip
    assert runs == {("ours", 0, 6): 0.9, ("upstream", 0, 6): 0.9, ("ours", 1, 6): 0.9,
                    ("upstream", 1, 6): 0.9, ("ours", 2, 6): 0.8, ("upstream", 2, 6): 0.7,
                    ("ours", 0, 4): 0.5}  # fmt: skip
    assert written["command"] == "quality.py --seeds 2"
    assert written["merged_commands"] == ["quality.py --start 1 --seeds 2"]
    six = done.stdout.split("set 3d, 6x25v5")[1]
    assert six.count("n=3)") == 4, done.stdout  # both classes, both sides
