"""Which cases the report shows as pictures: the best, the median and the worst by Dice.

A case's score is its foreground-mean Dice: the mean over its classes (labels or regions) of the
Dice in a ``summary.json``'s ``metric_per_case``, leaving out a class that is in neither the
reference nor the prediction (upstream scores it NaN). A case where every class is NaN has
nothing to show and is not ranked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.report.summaries import ReportInputError, case_name, dice_of, read_json_file

BEST, MEDIAN, WORST, ONLY = "best", "median", "worst", "only"
RANKS = (BEST, MEDIAN, WORST, ONLY)


@dataclass(frozen=True)
class ScoredCase:
    """One evaluated case: its id, foreground-mean Dice, Dice per class and its two files."""

    case: str
    dice: float
    class_dice: dict[str, float]
    prediction: Path
    reference: Path


@dataclass(frozen=True)
class Example:
    """A case shown, under its rank (``best``, ``median``, ``worst``; ``only`` for one case)."""

    rank: str
    case: ScoredCase


def foreground_dice(metrics: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """The case's foreground-mean Dice (NaN classes left out; NaN if all are) and its Dice per
    class, from one ``metric_per_case`` entry's ``metrics`` (background ``"0"`` ignored)."""
    per_class = {str(k): dice_of(v) for k, v in metrics.items() if str(k) != "0"}
    finite = [d for d in per_class.values() if math.isfinite(d)]
    return (sum(finite) / len(finite) if finite else math.nan), per_class


def _local(recorded: str, folder: Path) -> Path:
    """A file a summary names: the one of that name beside the summary when there is one (a
    moved tree, or a postprocessed folder whose summary names the files it was computed from),
    else the recorded path."""
    beside = folder / Path(recorded).name
    return beside if beside.is_file() else Path(recorded)


def scored_cases(summary_file: Path, file_ending: str) -> list[ScoredCase]:
    """Every case of a ``summary.json`` with its score, in the summary's order."""
    summary = read_json_file(summary_file)
    entries = summary.get("metric_per_case") if isinstance(summary, dict) else None
    if not isinstance(entries, list):
        msg = f"{summary_file}: no 'metric_per_case' list (not an evaluation summary)"
        raise ReportInputError(msg)
    cases = []
    for entry in entries:
        name = case_name(entry)
        if not (entry.get("prediction_file") and entry.get("reference_file")):
            msg = f"{summary_file}: the entry of {name} names no prediction or reference file"
            raise ReportInputError(msg)
        dice, per_class = foreground_dice(entry.get("metrics") or {})
        cases.append(
            ScoredCase(
                case=name.removesuffix(file_ending),
                dice=dice,
                class_dice=per_class,
                prediction=_local(entry["prediction_file"], summary_file.parent),
                reference=Path(entry["reference_file"]),
            )
        )
    return cases


def pick_examples(cases: list[ScoredCase]) -> list[Example]:
    """Best, median and worst of the scored cases (NaN left out), in that order.

    Ranked by Dice, highest first, ties by case id (so the best of equal cases is the first id,
    the worst the last). The median is the middle case, of an even count the better of the two
    middle ones; it is shown from three cases on (of two, neither is the median). One case is
    shown once, as ``only``; none gives no examples.
    """
    ranked = sorted((c for c in cases if math.isfinite(c.dice)), key=lambda c: (-c.dice, c.case))
    if not ranked:
        return []
    if len(ranked) == 1:
        return [Example(ONLY, ranked[0])]
    examples = [Example(BEST, ranked[0])]
    if len(ranked) >= 3:
        examples.append(Example(MEDIAN, ranked[(len(ranked) - 1) // 2]))
    examples.append(Example(WORST, ranked[-1]))
    return examples


def png_name(example: Example) -> str:
    """``best_<case>.png``: the rank first, as the workflow's report pattern reads it."""
    return f"{example.rank}_{example.case.case}.png"
