"""The report's tables: per-class Dice (CSV + markdown) and ``summary.csv`` (one row per candidate).

Numbers are written unrounded to CSV (they must equal the summaries'), rounded to 4 digits in
markdown; NaN (a class absent everywhere) is an empty CSV cell and ``-`` in markdown.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from nnunet_core.io.atomic import atomic_path
from nnunet_core.report.collect import FOREGROUND, ReportData

POSTPROCESSED = "selected, postprocessed (CV)"
TEST = "selected, test set"


def per_class_table(data: ReportData) -> pd.DataFrame:
    """Rows: classes then the foreground mean; columns: each candidate's CV Dice, pp, test."""
    keys = list(dict.fromkeys(data.cv_dice["label_key"]))
    names = data.class_names
    table = pd.DataFrame(
        {"label": keys + [FOREGROUND], "name": [names.get(k, k) for k in keys] + [FOREGROUND]}
    )
    for row in data.candidates.itertuples():
        own = data.cv_dice[data.cv_dice["identifier"] == row.identifier]
        dice = dict(zip(own["label_key"], own["dice"], strict=True))
        table[row.label] = [dice.get(k, math.nan) for k in keys] + [row.cv_foreground_dice]
    if data.selection is not None:
        after = dict(
            zip(
                data.selection.before_after["label_key"],
                data.selection.before_after["after"],
                strict=True,
            )
        )
        table[POSTPROCESSED] = [after.get(k, math.nan) for k in [*keys, FOREGROUND]]
    if data.test_dice is not None:
        test = dict(zip(data.test_dice["label_key"], data.test_dice["dice"], strict=True))
        table[TEST] = [test.get(k, math.nan) for k in [*keys, FOREGROUND]]
    return table


def summary_table(data: ReportData) -> pd.DataFrame:
    """One row per candidate: kind, CV Dice (foreground mean and per class), selected, test."""
    table = data.candidates.rename(columns={"identifier": "name"}).copy()
    for key, name in _class_columns(data):
        own = data.cv_dice[data.cv_dice["label_key"] == key]
        dice = dict(zip(own["identifier"], own["dice"], strict=True))
        table[f"cv_dice_{name}"] = [dice.get(i, math.nan) for i in data.candidates["identifier"]]
    selected = table["selected"].to_numpy(bool)
    if data.selection is not None:
        table["cv_foreground_dice_postprocessed"] = [
            data.selection.dice_post_pp if s else math.nan for s in selected
        ]
    if data.test_dice is not None:
        test = dict(zip(data.test_dice["label_key"], data.test_dice["dice"], strict=True))
        table["test_foreground_dice"] = [test.get(FOREGROUND) if s else math.nan for s in selected]
        for key, name in _class_columns(data):
            table[f"test_dice_{name}"] = [
                test.get(key, math.nan) if s else math.nan for s in selected
            ]
    return table


def fold_table(data: ReportData) -> pd.DataFrame:
    """Per fold and class: the validation Dice of each trained model
    (``validation/summary.json``)."""
    names = list(dict.fromkeys(data.fold_dice["name"]))
    wide = data.fold_dice.pivot(index=["model", "fold"], columns="name", values="dice")
    return wide[names].reset_index().rename_axis(columns=None)


def _class_columns(data: ReportData) -> list[tuple[str, str]]:
    keys = list(dict.fromkeys(data.cv_dice["label_key"]))
    return [(k, data.class_names.get(k, k)) for k in keys]


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:.4f}"
    return str(value).replace("|", "\\|")


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no ``tabulate`` dependency)."""
    header = "| " + " | ".join(_cell(c) for c in table.columns) + " |"
    rule = "|" + "|".join("---" if i < 2 else "---:" for i in range(len(table.columns))) + "|"
    rows = [
        "| " + " | ".join(_cell(v) for v in row) + " |" for row in table.itertuples(index=False)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def write_csv(table: pd.DataFrame, target: str | os.PathLike) -> Path:
    with atomic_path(target, suffix=".csv") as tmp:
        table.to_csv(tmp, index=False)
    return Path(target)


def write_markdown(text: str, target: str | os.PathLike) -> Path:
    with atomic_path(target, suffix=".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)
