"""The pure parts of benchmarks/quality/quality.py: log parsing, per-class statistics, the table.

Kept free of subprocesses and torch so that tests/benchmarks/test_quality_benchmark.py checks
them in milliseconds on recorded log lines of both sides (tests/data/quality/).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from scipy import stats

LEARNED_THRESHOLD = 0.5  # a class counts as learned once its pseudo Dice passes this
MEAN_TOLERANCE = 0.01  # target: our mean >= upstream's mean - this
SIDES = ("ours", "upstream")

EPOCH_LINE = re.compile(r":\s*Epoch (\d+)\s*$")
PSEUDO_DICE = "Pseudo dice"
# upstream prints numpy scalars with numpy >= 2: [np.float32(0.9123), np.float32(nan)]
NUMPY_SCALAR = re.compile(r"np\.float\d+\(([^)]*)\)")


def parse_pseudo_dice(lines: Iterable[str]) -> list[list[float]]:
    """Per-epoch pseudo Dice per class from a training log (ours or upstream's, same lines).

    Epochs come from the ``Epoch N`` lines, so a log continued after a restart keeps the
    epoch numbers; an epoch logged twice keeps its last value.
    """
    by_epoch: dict[int, list[float]] = {}
    epoch = -1
    for line in lines:
        found = EPOCH_LINE.search(line)
        if found:
            epoch = int(found.group(1))
            continue
        if PSEUDO_DICE in line and epoch >= 0:
            by_epoch[epoch] = parse_dice_list(line.split(PSEUDO_DICE, 1)[1])
    return [by_epoch[e] for e in sorted(by_epoch)]


def parse_dice_list(text: str) -> list[float]:
    """``[0.91, nan]`` or ``[np.float32(0.91), np.float32(nan)]`` -> floats."""
    inner = NUMPY_SCALAR.sub(r"\1", text).strip().strip("[]")
    return [float(part) for part in inner.split(",") if part.strip()]


def read_pseudo_dice(fold_folder: Path) -> list[list[float]]:
    """The pseudo Dice curve of a fold folder's newest training log."""
    logs = sorted(fold_folder.glob("training_log_*.txt"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return []
    return parse_pseudo_dice(logs[-1].read_text(encoding="utf-8").splitlines())


def learned_epochs(curve: Sequence[Sequence[float]], threshold: float = LEARNED_THRESHOLD):
    """Per class, the first epoch whose pseudo Dice passes ``threshold``; None: never."""
    classes = max((len(values) for values in curve), default=0)
    first: list[int | None] = [None] * classes
    for epoch, values in enumerate(curve):
        for index, value in enumerate(values):
            if first[index] is None and not math.isnan(value) and value > threshold:
                first[index] = epoch
    return first


def describe(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample standard deviation (ddof=1; None for one run), min and n, NaNs dropped."""
    finite = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not finite:
        return {"n": 0, "mean": None, "sd": None, "min": None, "values": list(values)}
    sd = statistics.stdev(finite) if len(finite) > 1 else None
    return {
        "n": len(finite),
        "mean": statistics.fmean(finite),
        "sd": sd,
        "min": min(finite),
        "values": [round(v, 4) for v in finite],
    }


def describe_learned(epochs: Sequence[int | None]) -> dict[str, Any]:
    """How many runs learned a class, and the median first epoch of those that did."""
    done = [e for e in epochs if e is not None]
    return {
        "learned": len(done),
        "runs": len(epochs),
        "median_epoch": statistics.median(done) if done else None,
        "epochs": list(epochs),
    }


def learning_tests(ours: dict[str, Any], upstream: dict[str, Any], epochs: int) -> dict[str, Any]:
    """Whether one side learns a class less often (Fisher's exact test on the runs that did)
    or later (Mann-Whitney U on the first epoch; a run that never did ranks after the last of
    ``epochs``). None where a side has no runs."""
    if not ours["runs"] or not upstream["runs"]:
        return {"learned_p": None, "learned_epoch_p": None}
    table = [[side["learned"], side["runs"] - side["learned"]] for side in (ours, upstream)]
    first = [[epochs if e is None else e for e in side["epochs"]] for side in (ours, upstream)]
    same = len(set(first[0] + first[1])) == 1  # all tied: no test, nothing differs
    return {
        "learned_p": float(stats.fisher_exact(table).pvalue),
        "learned_epoch_p": 1.0 if same else float(stats.mannwhitneyu(*first).pvalue),
    }


def dice_tests(ours: Sequence[float], upstream: Sequence[float]) -> dict[str, Any]:
    """Whether the test Dice differs in location (Mann-Whitney U) or in spread (Brown-Forsythe:
    Levene's test about the medians, robust to the all-or-nothing runs of a small class). None
    with fewer than two runs a side or no variation at all."""
    if len(ours) < 2 or len(upstream) < 2 or len(set(ours) | set(upstream)) < 2:
        return {"dice_p": None, "spread_p": None}
    deviations = [[abs(v - statistics.median(side)) for v in side] for side in (ours, upstream)]
    alike = all(len(set(d)) == 1 for d in deviations)  # the test divides by their variation
    spread = None if alike else float(stats.levene(ours, upstream, center="median").pvalue)
    return {"dice_p": float(stats.mannwhitneyu(ours, upstream).pvalue), "spread_p": spread}


def verdict(ours: dict[str, Any], upstream: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets: our mean >= upstream's mean - 0.01, our spread no wider."""
    if ours["mean"] is None or upstream["mean"] is None:
        return {"difference": None, "mean_ok": None, "sd_ok": None}
    difference = ours["mean"] - upstream["mean"]
    sd_ok = None
    if ours["sd"] is not None and upstream["sd"] is not None:
        sd_ok = ours["sd"] <= upstream["sd"]
    return {
        "difference": difference,
        "mean_ok": difference >= -MEAN_TOLERANCE,
        "sd_ok": sd_ok,
    }


def presence_split(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per label, from a test ``summary.json``: the mean Dice over the cases whose reference has
    the label, and the voxels predicted on the cases whose reference lacks it.

    A case without the label scores Dice 0 for a single false voxel (nnU-Net's rule), so a few
    stray voxels there move a small class's mean by a whole case's weight; the two figures tell
    that apart from a worse segmentation of the cases that have it.
    """
    out: dict[str, dict[str, Any]] = {}
    for case in summary["metric_per_case"]:
        for label, metrics in case["metrics"].items():
            entry = out.setdefault(label, {"dice": [], "false_voxels": 0, "cases_without": 0})
            if metrics["n_ref"] > 0:
                entry["dice"].append(float(metrics["Dice"]))
            else:
                entry["false_voxels"] += int(metrics["n_pred"])
                entry["cases_without"] += 1
    return {
        label: {
            "dice_where_present": statistics.fmean(e["dice"]) if e["dice"] else None,
            "false_voxels": e["false_voxels"],
            "cases_without": e["cases_without"],
        }
        for label, e in out.items()
    }


def describe_presence(splits: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Over runs' ``presence_split`` entries of one class: the Dice where present (described)
    and the voxels each run predicted where the class is absent."""
    present = [x["dice_where_present"] for x in splits if x["dice_where_present"] is not None]
    return {
        "dice_where_present": describe(present),
        "false_voxels": [x["false_voxels"] for x in splits],
    }


def summarise(runs: Sequence[dict[str, Any]], labels: dict[str, str]) -> list[dict[str, Any]]:
    """One row per foreground class: test Dice and learned epochs of each side, the verdict.

    ``runs`` are the records of one set (``side``, ``test_dice`` {label: Dice},
    ``learned`` [epoch or None per class]); ``labels`` maps label value -> class name.
    """
    rows = []
    epochs = max((r["schedule"]["epochs"] for r in runs if "schedule" in r), default=0)
    for position, (label, name) in enumerate(sorted(labels.items(), key=lambda x: int(x[0]))):
        row: dict[str, Any] = {"label": label, "class": name}
        for side in SIDES:
            mine = [r for r in runs if r["side"] == side]
            row[side] = describe([r["test_dice"].get(label, math.nan) for r in mine])
            row[side]["learned"] = describe_learned([_at(r["learned"], position) for r in mine])
            split = [r["by_presence"][label] for r in mine if label in r.get("by_presence", {})]
            row[side].update(describe_presence(split))
        row.update(verdict(row["ours"], row["upstream"]))
        row.update(learning_tests(row["ours"]["learned"], row["upstream"]["learned"], epochs))
        row.update(dice_tests(row["ours"]["values"], row["upstream"]["values"]))
        rows.append(row)
    return rows


def _at(values: Sequence[int | None], index: int) -> int | None:
    return values[index] if index < len(values) else None


def _mean_sd(stats: dict[str, Any]) -> str:
    if stats["mean"] is None:
        return "-"
    sd = "n/a" if stats["sd"] is None else f"{stats['sd']:.4f}"
    return f"{stats['mean']:.4f} ± {sd} (min {stats['min']:.3f}, n={stats['n']})"


def _learned(stats: dict[str, Any]) -> str:
    median = stats["median_epoch"]
    return f"{stats['learned']}/{stats['runs']} @ {'-' if median is None else median}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _flag(value: bool | None) -> str:
    return "n/a" if value is None else ("pass" if value else "FAIL")


def format_table(title: str, rows: Sequence[dict[str, Any]]) -> str:
    """The printed table of one set: per class both sides, the difference, pass/fail."""
    header = (
        f"{'class':<8} | {'ours test Dice':<36} | {'upstream test Dice':<36} | {'diff':>7} | "
        f"mean | sd   | learned ours | learned upstream"
    )
    lines = [title, header, "-" * len(header)]
    for row in rows:
        diff = "-" if row["difference"] is None else f"{row['difference']:+.4f}"
        lines.append(
            f"{row['class']:<8} | {_mean_sd(row['ours']):<36} | {_mean_sd(row['upstream']):<36} | "
            f"{diff:>7} | {_flag(row['mean_ok']):<4} | {_flag(row['sd_ok']):<4} | "
            f"{_learned(row['ours']['learned']):<12} | {_learned(row['upstream']['learned'])}"
        )
    lines.append(
        "learned: runs whose pseudo Dice passed 0.5 / runs @ median first epoch (0-based); "
        "targets: mean >= upstream - 0.01, sd <= upstream's"
    )
    lines += ["", "the same runs, split by the test cases that have the class and those without:"]
    split_header = (
        f"{'class':<8} | {'ours Dice where present':<36} | {'upstream Dice where present':<36} | "
        "voxels where absent, per run: ours / upstream"
    )
    lines += [split_header, "-" * len(split_header)]
    for row in rows:
        ours, upstream = (row[side] for side in SIDES)
        lines.append(
            f"{row['class']:<8} | {_mean_sd(ours['dice_where_present']):<36} | "
            f"{_mean_sd(upstream['dice_where_present']):<36} | "
            f"{ours['false_voxels']} / {upstream['false_voxels']}"
        )
    lines += ["", "ours against upstream's: test Dice (Mann-Whitney U) and its spread "
              "(Brown-Forsythe); learned less often (Fisher's exact test) or later "
              "(Mann-Whitney U on the first epoch, never = after the last):"]  # fmt: skip
    for row in rows:
        if row.get("learned_p") is not None:
            lines.append(f"{row['class']:<8} | Dice p {_p(row.get('dice_p'))} | spread p "
                         f"{_p(row.get('spread_p'))} | runs learned p {row['learned_p']:.3f} | "
                         f"first epoch p {row['learned_epoch_p']:.3f}")  # fmt: skip
    return "\n".join(lines)
