"""The results table of a paper: per dataset and candidate, mean and spread over seeds, bootstrap
intervals over cases, and the Wilcoxon test of the selected model against each other candidate.

Input: ``paper_data.run_frame`` of every run (dataset x seed). Every mean is upstream's
``foreground_mean`` (``AVERAGING``): per class over cases, empty classes (NaN) left out, then over
classes, so that a seed's value equals the ``summary.json`` and the report. Per dataset and
candidate:

- ``<metric>_mean``: the mean over seeds of each seed's class mean; ``<metric>_sd_seeds``:
  their sample standard deviation (NaN with one seed);
- ``<metric>_ci_low`` / ``_ci_high``: bootstrap 95 % interval of the class mean, resampling
  cases whose values are averaged over seeds (``paper_stats.bootstrap_class_mean_ci``, seeded);
  ``ci_few_cases``: true below ``paper_stats.FEW_CASES`` cases (the interval is not to be trusted);
- ``p_wilcoxon``, ``median_difference``, ``favours``: the selected model against this candidate
  on the same cases' Dice (each case's mean over its non-empty classes, seed-averaged), two-sided.

The selected model is the one most seeds selected (ties: the better cross-validation Dice). The
``test set`` row is the selected model's test cases. Written as CSV and as a booktabs LaTeX table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from nnunet_core.io.atomic import atomic_path
from nnunet_core.report.paper_data import PAPER_METRICS, TEST_SET
from nnunet_core.report.paper_stats import (
    FEW_CASES,
    bootstrap_class_mean_ci,
    class_mean,
    mean_and_sd,
    paired_test,
)

PAIRED_METRIC = "Dice"
AVERAGING = "mean over classes of each class's mean over cases (empty classes left out per class)"


def selected_candidate(frame: pd.DataFrame, selections: Sequence[str]) -> str:
    """The candidate most seeds selected; ties broken by the higher mean cross-validation Dice."""
    counts = pd.Series(list(selections)).value_counts()
    tied = list(counts[counts == counts.max()].index)
    if len(tied) == 1:
        return str(tied[0])
    dice = {c: metric_columns(frame, c, PAIRED_METRIC, 0, interval=False) for c in tied}
    return str(max(tied, key=lambda c: dice[c].get(f"{PAIRED_METRIC}_mean", -math.inf)))


def _matrix(part: pd.DataFrame) -> pd.DataFrame:
    """cases x classes of ``value`` (averaged over the seeds a case has; NaN stays NaN)."""
    return part.groupby(["case", "label"], sort=False)["value"].mean().unstack("label")


def _seed_averaged(frame: pd.DataFrame, candidate: str, metric: str) -> pd.Series:
    """Each case's mean over its non-empty classes, averaged over seeds (for paired tests)."""
    part = frame[(frame["candidate"] == candidate) & (frame["metric"] == metric)]
    per_case = part.groupby(["case", "seed"])["value"].mean()  # NaN classes left out
    return per_case.groupby("case").mean()


def metric_columns(
    frame: pd.DataFrame, candidate: str, metric: str, seed: int, interval: bool = True
) -> dict:
    part = frame[(frame["candidate"] == candidate) & (frame["metric"] == metric)]
    if part.empty:
        return {}
    per_seed = [class_mean(_matrix(p).to_numpy()) for _, p in part.groupby("seed")]
    mean, sd = mean_and_sd(per_seed)
    if not interval:
        return {f"{metric}_mean": mean}
    low, high = bootstrap_class_mean_ci(_matrix(part).to_numpy(), seed=seed)
    return {
        f"{metric}_mean": mean,
        f"{metric}_sd_seeds": sd,
        f"{metric}_ci_low": low,
        f"{metric}_ci_high": high,
    }


def paired_columns(frame: pd.DataFrame, selected: str, candidate: str) -> dict:
    if candidate in (selected, TEST_SET):
        return {}
    mine = _seed_averaged(frame, selected, PAIRED_METRIC)
    other = _seed_averaged(frame, candidate, PAIRED_METRIC)
    cases = mine.index.intersection(other.index)
    test = paired_test(mine[cases].to_numpy(), other[cases].to_numpy(), PAIRED_METRIC)
    return {
        "p_wilcoxon": test["p_value"],
        "median_difference": test["median_difference"],
        "favours": test["favours"],
    }


def dataset_rows(frame: pd.DataFrame, selections: Sequence[str], seed: int = 0) -> list[dict]:
    """One dataset's rows: each candidate (cross-validation), then the test set if any."""
    selected = selected_candidate(frame, selections)
    candidates = [c for c in dict.fromkeys(frame["candidate"]) if c != TEST_SET]
    if TEST_SET in set(frame["candidate"]):
        candidates.append(TEST_SET)
    rows = []
    for candidate in candidates:
        part = frame[frame["candidate"] == candidate]
        row = {
            "dataset": str(frame["dataset"].iloc[0]),
            "model": candidate,
            "evaluated_on": "test" if candidate == TEST_SET else "cross-validation",
            "selected": candidate == selected,
            "seeds": int(part["seed"].nunique()),
            "cases": int(part["case"].nunique()),
            "ci_few_cases": int(part["case"].nunique()) < FEW_CASES,
        }
        for metric in PAPER_METRICS:
            row.update(metric_columns(frame, candidate, metric, seed))
        row.update(paired_columns(frame, selected, candidate))
        rows.append(row)
    return rows


def results_table(frames: Sequence[pd.DataFrame], selections: dict, seed: int = 0) -> pd.DataFrame:
    """All datasets' rows; ``selections`` maps a dataset to the candidate each seed selected."""
    frame = pd.concat(frames, ignore_index=True)
    rows = []
    for dataset in dict.fromkeys(frame["dataset"]):
        rows += dataset_rows(frame[frame["dataset"] == dataset], selections[dataset], seed)
    return pd.DataFrame(rows)


def write_csv(table: pd.DataFrame, target: Path) -> Path:
    """Fixed float format, so the same numbers give the same bytes."""
    with atomic_path(target) as tmp:
        table.to_csv(tmp, index=False, float_format="%.6g")
    return target


def _cell(row: pd.Series, metric: str, digits: int) -> str:
    mean = row.get(f"{metric}_mean", math.nan)
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "--"
    text = f"{mean:.{digits}f}"
    sd = row.get(f"{metric}_sd_seeds", math.nan)
    if isinstance(sd, float) and not math.isnan(sd):
        text += rf" $\pm$ {sd:.{digits}f}"
    low, high = row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high")
    flag = r"$^\dagger$" if row.get("ci_few_cases", False) else ""
    return text + f" [{low:.{digits}f}, {high:.{digits}f}]{flag}"


def _p_cell(row: pd.Series) -> str:
    p = row.get("p_wilcoxon", math.nan)
    if not isinstance(p, float) or math.isnan(p):
        return "--"
    arrow = {"selected": " (sel.)", "other": " (this)", "neither": ""}.get(row.get("favours"), "")
    return ("$<$0.001" if p < 0.001 else f"{p:.3f}") + arrow


def latex_escape(text: str) -> str:
    return text.replace("_", r"\_").replace("%", r"\%")


def table_caption(datasets: Sequence[str]) -> str:
    """What the table's numbers are, for the LaTeX caption."""
    return (
        f"{', '.join(latex_escape(d) for d in datasets)}: cross-validation of every candidate "
        r"and the selected model's test set; mean $\pm$ sd over seeds [bootstrap 95 \% CI "
        r"over cases]; p: two-sided Wilcoxon signed-rank test of the Dice against the selected "
        r"model ($\star$). "
        f"Averaging: {AVERAGING}, as nnU-Net's foreground mean. "
        rf"$\dagger$: interval from fewer than {FEW_CASES} cases, too few for the bootstrap "
        "to be trusted (it resamples only the cases at hand)."
    )


def few_cases_note() -> str:
    """The footnote under a table with a flagged interval (the same words in every table)."""
    return (
        rf"$^\dagger$ Interval from fewer than {FEW_CASES} cases: the bootstrap resamples only "
        "the cases at hand, so the interval is far too narrow to trust; whether a difference is "
        "significant is the paired test's to say, not the interval's."
    )


def table_footnote(latex: str, note: str) -> str:
    """``note`` in small type under the tabular, inside the table environment."""
    end = "\\end{table}"
    if end not in latex:
        return latex + f"\n{{\\footnotesize {note}}}\n"
    head, _, tail = latex.rpartition(end)
    return head + f"\\par\\footnotesize {note}\n" + end + tail


def latex_table(table: pd.DataFrame, caption: str) -> str:
    """A booktabs table: one row per dataset and model, mean $\\pm$ sd over seeds [95 % CI]."""
    metrics = [m for m in PAPER_METRICS if f"{m}_mean" in table]
    digits = {"Dice": 3, "NSD": 3, "HD95": 2}
    shown = pd.DataFrame(
        {
            "Dataset": [latex_escape(d) for d in table["dataset"]],
            "Model": [
                latex_escape(m) + (r" $\star$" if s else "")
                for m, s in zip(table["model"], table["selected"], strict=True)
            ],
            **{
                ("HD95 (mm)" if m == "HD95" else m): [
                    _cell(row, m, digits[m]) for _, row in table.iterrows()
                ]
                for m in metrics
            },
            "p (Wilcoxon)": [_p_cell(row) for _, row in table.iterrows()],
        }
    )
    styler = shown.style.hide(axis="index")
    text = styler.to_latex(
        hrules=True, caption=caption, column_format="ll" + "r" * (len(shown.columns) - 2)
    )
    if "ci_few_cases" in table and bool(table["ci_few_cases"].any()):
        text = table_footnote(text, few_cases_note())
    return text


def write_latex(table: pd.DataFrame, caption: str, target: Path) -> Path:
    with atomic_path(target) as tmp:
        Path(tmp).write_text(latex_table(table, caption), encoding="utf-8")
    return target
