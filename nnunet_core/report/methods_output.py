"""The files of a methods comparison: ``methods_comparison.csv`` and ``.tex`` (a method a row, a
dataset and its number of cases a column each, the mean rank last, as the nnU-Net Revisited
tables; intervals from fewer than ``paper_stats.FEW_CASES`` cases flagged with a dagger and a
footnote; a star only where the Holm-adjusted test is below ``methods_stats.ALPHA``), and per
dataset the figure of each case's Dice, each method against the baseline (PNG, PDF, SVG), and
``methods.md`` describing every method (``methods_text``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from nnunet_core.io.atomic import atomic_path
from nnunet_core.layout.work import METHODS_COMPARISON, METHODS_FIGURE
from nnunet_core.report import figures
from nnunet_core.report.methods_comparison import (
    METRIC,
    MethodRun,
    comparison_table,
    method_cases,
)
from nnunet_core.report.methods_stats import ALPHA
from nnunet_core.report.methods_text import write_methods_texts
from nnunet_core.report.paper_stats import FEW_CASES
from nnunet_core.report.paper_tables import (
    few_cases_note,
    latex_escape,
    table_footnote,
    write_csv,
)

DAGGER = r"$^\dagger$"


def _cell(row: pd.Series) -> str:
    mean = row[f"{METRIC}_mean"]
    if not isinstance(mean, float) or math.isnan(mean):
        return "--"
    text = f"{mean:.3f}"
    sd = row[f"{METRIC}_sd_seeds"]
    if isinstance(sd, float) and not math.isnan(sd):
        text += rf" $\pm$ {sd:.3f}"
    difference = row.get("diff_mean", math.nan)
    if isinstance(difference, float) and not math.isnan(difference):
        text += rf" ($\Delta$ {difference:+.3f} [{row['diff_ci_low']:+.3f}, "
        text += f"{row['diff_ci_high']:+.3f}]"
        if bool(row.get("ci_few_cases", False)):
            text += DAGGER
        if bool(row.get("significant", False)):  # the Holm-adjusted test, never the interval
            text += r"$^{*}$"
        text += ")"
    return text


def _cases(row: pd.Series) -> str:
    """The cases a row's numbers rest on: the paired ones against the baseline, else its own."""
    paired = row.get("diff_n")
    if paired is not None and not pd.isna(paired):
        return str(int(paired))
    return str(int(row["cases"]))


def caption() -> str:
    return (
        r"Dice per dataset: mean $\pm$ sd over seeds ($\Delta$: difference to the baseline "
        r"over the $n$ cases both have [bootstrap 95 \% CI]; $^{*}$: paired Wilcoxon "
        rf"signed-rank p $<$ {ALPHA} after Holm's correction over every comparison of the table; "
        rf"{DAGGER}: interval from fewer than {FEW_CASES} cases, not to be read as a test). "
        r"Mean rank: the method's rank by mean Dice on each dataset (1 the best), averaged "
        r"over the datasets."
    )


def latex_table(table: pd.DataFrame) -> str:
    """A booktabs table: a method a row, a dataset and its cases ($n$) a column each, then the
    mean rank; a footnote under it where an interval is flagged."""
    datasets = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))
    shown: dict[str, list[str]] = {"Method": []}
    for dataset in datasets:
        shown[latex_escape(dataset)] = []
        shown[rf"$n$ ({latex_escape(dataset)})"] = []
    shown["Mean rank"] = []
    for method in methods:
        mine = table[table["method"] == method]
        star = r" (baseline)" if bool(mine["baseline"].iloc[0]) else ""
        shown["Method"].append(latex_escape(method) + star)
        for dataset in datasets:
            row = mine[mine["dataset"] == dataset]
            shown[latex_escape(dataset)].append(_cell(row.iloc[0]) if len(row) else "--")
            cases = _cases(row.iloc[0]) if len(row) else "--"
            shown[rf"$n$ ({latex_escape(dataset)})"].append(cases)
        shown["Mean rank"].append(f"{float(mine['mean_rank'].iloc[0]):.2f}")
    frame = pd.DataFrame(shown)
    text = frame.style.hide(axis="index").to_latex(
        hrules=True, caption=caption(), column_format="l" + "r" * (len(frame.columns) - 1)
    )
    if bool(table.get("ci_few_cases", pd.Series(dtype=bool)).any()):
        text = table_footnote(text, few_cases_note())
    return text


def dice_figure(cases: pd.DataFrame, baseline: str, title: str, target: Path) -> Path:
    """Each case's Dice (seed-averaged): the baseline's on x, each other method's on y."""
    figure = figures._figure(5.0, 4.6)
    ax = figure.add_subplot()
    ax.plot([0, 1], [0, 1], color="tab:gray", linewidth=0.8, linestyle="--")
    reference = cases[cases["method"] == baseline].groupby("case")["value"].mean()
    for method in dict.fromkeys(cases["method"]):
        if method == baseline:
            continue
        mine = cases[cases["method"] == method].groupby("case")["value"].mean()
        shared = reference.index.intersection(mine.index)
        ax.scatter(reference[shared], mine[shared], label=method, s=24, alpha=0.8)
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), title=title)
    ax.set_xlabel(f"{baseline} (baseline): Dice per case")
    ax.set_ylabel("method: Dice per case")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize="small")
    return figures._save(figure, target)


def write_methods_comparison(
    runs: Sequence[MethodRun], baseline: str, output: Path, bootstrap_seed: int = 0
) -> list[Path]:
    """``methods_comparison.csv/.tex`` under ``output``, ``<dataset>/methods_dice.*`` and
    ``<dataset>/methods.md`` each."""
    cases = method_cases(runs)
    table = comparison_table(cases, baseline, bootstrap_seed)
    csv = write_csv(table, output / f"{METHODS_COMPARISON}.csv")
    tex = output / f"{METHODS_COMPARISON}.tex"
    with atomic_path(tex) as tmp:
        Path(tmp).write_text(latex_table(table), encoding="utf-8")
    written = [csv, tex]
    for dataset in dict.fromkeys(cases["dataset"]):
        part = cases[cases["dataset"] == dataset]
        png = dice_figure(part, baseline, dataset, output / dataset / f"{METHODS_FIGURE}.png")
        written += [png, *figures.print_versions(png)]
    return written + write_methods_texts(runs, baseline, output)
