"""What the selection chose and how it did: postprocessing effect, test-set Dice.

The postprocessing record is the ``postprocessing`` entry of ``inference_information.json``
(ours); for an upstream-style file without it, the winner's ``postprocessing.json`` is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nnunet_core.evaluation.postprocessing_file import read_postprocessing
from nnunet_core.report.summaries import (
    FOREGROUND,
    ReportInputError,
    case_name,
    dice_of,
    per_class_rows,
    read_json_file,
)


@dataclass
class Selection:
    """The winner and what postprocessing did to its cross-validation."""

    winner: str
    dice_pre_pp: float
    dice_post_pp: float
    steps: list[dict[str, Any]]  # accepted
    steps_tried: list[dict[str, Any]]
    before_after: pd.DataFrame  # label, name, before, after (foreground mean last)


def _pp_scores(content: dict[str, Any], pp_file: Path) -> list[dict[str, Any]]:
    """The summaries before and after postprocessing of a ``postprocessing.json``."""
    scores = [content.get("input_folder"), content.get("postprocessed")]
    if not all(isinstance(s, dict) and isinstance(s.get("mean"), dict) for s in scores):
        msg = (
            f"{pp_file}: no 'input_folder' and 'postprocessed' summaries with a 'mean' (written "
            "by `nnunet-core find-best-config`)"
        )
        raise ReportInputError(msg)
    return scores


def collect_selection(
    info: dict[str, Any], names: dict[str, str], notes: list[str]
) -> Selection | None:
    """The winner and its postprocessing (``postprocessing.json`` when the info lacks it)."""
    best = info.get("best_model_or_ensemble", {})
    winner = info.get("winner") or best.get("identifier", "")
    post = info.get("postprocessing")
    if post is None:
        pp_file = Path(best.get("postprocessing_file", ""))
        if pp_file.is_file():
            content, steps = read_postprocessing(pp_file, ReportInputError)
            scores = _pp_scores(content, pp_file)
            tried = (
                content.get("steps_tried") if isinstance(content.get("steps_tried"), list) else []
            )
            post = {
                "steps": steps,
                "steps_tried": [s for s in tried if isinstance(s, dict)],
                "mean_dice_before": scores[0]["mean"],
                "mean_dice_after": scores[1]["mean"],
                "foreground_mean_dice_before": scores[0].get("foreground_mean"),
                "foreground_mean_dice_after": scores[1].get("foreground_mean"),
            }
    if post is None:
        notes.append(f"no postprocessing record for {winner}: selection figure skipped")
        return None
    before, after = post.get("mean_dice_before", {}), post.get("mean_dice_after", {})
    rows = [
        {"label_key": r["label_key"], "name": r["name"], "before": r["dice"]}
        for r in per_class_rows(before, names)
    ]
    for row in rows:
        row["after"] = dice_of(after.get(row["label_key"]))
    rows.append(
        {
            "label_key": FOREGROUND,
            "name": FOREGROUND,
            "before": dice_of(post.get("foreground_mean_dice_before")),
            "after": dice_of(post.get("foreground_mean_dice_after")),
        }
    )
    return Selection(
        winner=winner,
        dice_pre_pp=dice_of(best.get("result_on_crossval_pre_pp", rows[-1]["before"])),
        dice_post_pp=dice_of(best.get("result_on_crossval_post_pp", rows[-1]["after"])),
        steps=list(post.get("steps", [])),
        steps_tried=list(post.get("steps_tried", [])),
        before_after=pd.DataFrame(rows, columns=["label_key", "name", "before", "after"]),
    )


def collect_test(test_summary: Path, names: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Mean Dice per class (+ foreground mean) and per case of a test-set ``summary.json``."""
    summary = read_json_file(test_summary)
    means = per_class_rows(summary.get("mean", {}), names)
    means.append(
        {
            "label_key": FOREGROUND,
            "name": FOREGROUND,
            "dice": dice_of(summary.get("foreground_mean")),
        }
    )
    cases = []
    for case in summary.get("metric_per_case", []):
        cases += [
            {"case": case_name(case), **r} for r in per_class_rows(case.get("metrics", {}), names)
        ]
    return (
        pd.DataFrame(means, columns=["label_key", "name", "dice"]),
        pd.DataFrame(cases, columns=["case", "label_key", "name", "dice"]),
    )
