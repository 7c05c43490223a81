"""The files of a methods comparison: ``methods_comparison.csv`` and ``.tex`` (a method a row, a
dataset a column, the mean rank last, as the nnU-Net Revisited tables), and per dataset the
figure of each case's Dice, each method against the baseline (PNG, PDF, SVG)."""

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
from nnunet_core.report.paper_tables import latex_escape, write_csv

SIGNIFICANT = 0.05


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
        p = row.get("p_holm", math.nan)
        if isinstance(p, float) and p < SIGNIFICANT:
            text += r"$^{*}$"
        text += ")"
    return text


def latex_table(table: pd.DataFrame) -> str:
    """A booktabs table: a method a row, a dataset a column, then the mean rank."""
    datasets = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))
    shown = {"Method": [], **{latex_escape(d): [] for d in datasets}, "Mean rank": []}
    for method in methods:
        mine = table[table["method"] == method]
        star = r" (baseline)" if bool(mine["baseline"].iloc[0]) else ""
        shown["Method"].append(latex_escape(method) + star)
        for dataset in datasets:
            row = mine[mine["dataset"] == dataset]
            shown[latex_escape(dataset)].append(_cell(row.iloc[0]) if len(row) else "--")
        shown["Mean rank"].append(f"{float(mine['mean_rank'].iloc[0]):.2f}")
    caption = (
        r"Dice per dataset: mean $\pm$ sd over seeds ($\Delta$: difference to the baseline "
        r"over cases [bootstrap 95 \% CI]; $^{*}$: paired Wilcoxon signed-rank p $<$ 0.05 "
        r"after Holm's correction across datasets). Mean rank: the method's rank by mean Dice "
        r"on each dataset (1 the best), averaged over the datasets."
    )
    frame = pd.DataFrame(shown)
    return frame.style.hide(axis="index").to_latex(
        hrules=True, caption=caption, column_format="l" + "r" * (len(frame.columns) - 1)
    )


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
    """``methods_comparison.csv/.tex`` under ``output``, ``<dataset>/methods_dice.*`` each."""
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
    return written
