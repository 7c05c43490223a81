"""Stages of the pipeline benchmark: which job belongs to which stage, per-stage figures from
job records, the ratio table, and the training/validation split read from fold logs.

Both sides are reported under upstream's stage names, so a row compares the same work: our
verify/fingerprint/plan/splits/preprocess jobs against nnUNetv2_plan_and_preprocess, our
crossval/ensemble-cv/find-best-config against nnUNetv2_find_best_configuration, and so on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from benchmarks.speed.pipeline.monitor import JobRecord

STAGES = (
    "plan_preprocess",
    "training",
    "selection",
    "prediction",
    "ensembling",
    "postprocessing",
    "evaluation",
    "report",
)
OURS_STAGE = {
    "synthesize": "dataset",
    "verify": "plan_preprocess",
    "fingerprint": "plan_preprocess",
    "plan": "plan_preprocess",
    "splits": "plan_preprocess",
    "preprocess": "plan_preprocess",
    "plan-and-preprocess": "plan_preprocess",
    "train": "training",
    "crossval": "selection",
    "ensemble-cv": "selection",
    "find-best-config": "selection",
    "predict": "prediction",
    "ensemble": "ensembling",
    "apply-postprocessing": "postprocessing",
    "evaluate": "evaluation",
    "report": "report",
}
UPSTREAM_STAGE = {
    "nnUNetv2_plan_and_preprocess": "plan_preprocess",
    "nnUNetv2_train": "training",
    "nnUNetv2_find_best_configuration": "selection",
    "nnUNetv2_predict": "prediction",
    "nnUNetv2_ensemble": "ensembling",
    "nnUNetv2_apply_postprocessing": "postprocessing",
    "nnUNetv2_evaluate_folder": "evaluation",
}
OURS_COMMAND = re.compile(r"nnunet[-_]core(?:\.\w+)*\s+([a-z][\w-]*)")
UPSTREAM_COMMAND = re.compile(r"(nnUNetv2_\w+)")


def ours_stage(argv: Sequence[str]) -> str:
    """Stage of one of our jobs from its shell's argv (the first `nnunet-core <command>`)."""
    match = OURS_COMMAND.search(" ".join(argv))
    return OURS_STAGE.get(match.group(1), "other") if match else "other"


def upstream_stage(argv: Sequence[str]) -> str:
    """Stage of one upstream command from its argv (`python .../nnUNetv2_train ...`)."""
    match = UPSTREAM_COMMAND.search(" ".join(argv))
    return UPSTREAM_STAGE.get(match.group(1), "other") if match else "other"


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of [start, end] intervals: a stage's wall time when its jobs overlap
    each other (parallel folds) and other stages' jobs."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


@dataclass
class StageFigures:
    """One stage on one side: wall seconds, CPU seconds, peak summed RSS (MB), job count."""

    wall_s: float
    cpu_s: float
    peak_mb: float
    jobs: int

    def as_dict(self) -> dict:
        return {k: round(v, 2) if isinstance(v, float) else v for k, v in asdict(self).items()}


def stages_from_jobs(
    jobs: Iterable[JobRecord], peak_mb_by_label: dict[str, float]
) -> dict[str, StageFigures]:
    """Per stage: the union of its jobs' lifetimes, the sum of their CPU, the sampled peak."""
    by_stage: dict[str, list[JobRecord]] = {}
    for job in jobs:
        by_stage.setdefault(job.label, []).append(job)
    return {
        stage: StageFigures(
            wall_s=union_seconds((j.start, j.end) for j in records),
            cpu_s=sum(j.cpu for j in records),
            peak_mb=peak_mb_by_label.get(stage, 0.0),
            jobs=len(records),
        )
        for stage, records in by_stage.items()
    }


def ratio(ours: float | None, upstream: float | None) -> float | None:
    """ours / upstream, or None where either is missing or upstream is zero."""
    if ours is None or not upstream:
        return None
    return ours / upstream


def ratio_rows(ours: dict[str, dict], upstream: dict[str, dict]) -> list[dict]:
    """One row per stage (upstream's order, then any other) and the total: each side's wall,
    CPU and peak, and ours/upstream for each."""
    present = set(ours) | set(upstream)
    names = [s for s in STAGES if s in present]
    names += sorted(present - set(STAGES) - {"total"})
    names += ["total"] if "total" in present else []
    rows = []
    for name in names:
        a, b = ours.get(name, {}), upstream.get(name, {})
        row = {"stage": name}
        for key in ("wall_s", "cpu_s", "peak_mb"):
            row[f"ours_{key}"], row[f"upstream_{key}"] = a.get(key), b.get(key)
            row[f"ratio_{key}"] = ratio(a.get(key), b.get(key))
        rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as a fixed-width text table (missing values as '-')."""
    header = (
        f"{'stage':<16}{'wall ours':>10}{'upstr':>9}{'ratio':>7}"
        f"{'cpu ours':>10}{'upstr':>9}{'ratio':>7}{'MB ours':>9}{'upstr':>8}{'ratio':>7}"
    )
    lines = [header, "-" * len(header)]
    for row in rows:
        cells = [f"{row['stage']:<16}"]
        for key, width in (("wall_s", 10), ("cpu_s", 10), ("peak_mb", 9)):
            cells.append(_cell(row[f"ours_{key}"], width, ".1f"))
            cells.append(_cell(row[f"upstream_{key}"], 9 if width == 10 else 8, ".1f"))
            cells.append(_cell(row[f"ratio_{key}"], 7, ".2f"))
        lines.append("".join(cells))
    return "\n".join(lines)


def _cell(value: float | None, width: int, spec: str) -> str:
    return f"{'-' if value is None else format(value, spec):>{width}}"


TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?): (.*)$")
TRAINING_DONE = ("training finished", "Training done.")
VALIDATION_DONE = "Mean Validation Dice"


def fold_log_phases(text: str) -> dict[str, float] | None:
    """Seconds of training and of validation (with .npz export) from one fold's log, ours
    (``train_<c>_fold<k>.log``) or upstream's (``training_log_*.txt``): first line to the
    training-done line, then to the mean validation Dice. Also the first and last times (epoch
    seconds), for the start-up before the first line. None without those lines."""
    first = done = validated = None
    for line in text.splitlines():
        match = TIMESTAMP.match(line)
        if not match:
            continue
        when = datetime.fromisoformat(match.group(1)).timestamp()
        message = match.group(2)
        first = when if first is None else first
        if done is None and message.startswith(TRAINING_DONE):
            done = when
        if message.startswith(VALIDATION_DONE):
            validated = when
    if first is None or done is None or validated is None:
        return None
    return {
        "first_line": first,
        "training_s": done - first,
        "validation_s": validated - done,
        "last_line": validated,
    }
