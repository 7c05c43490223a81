"""The methods of a paper against its baseline, per dataset (``nnunet-core methods-table``).

Input: one ``paper_data.Run`` per (dataset, seed, method). A method's value of a case is its
Dice on the test set where the runs have test labels, else the cross-validation Dice of the
model each seed's run selected (nnU-Net's method picks its configuration itself). Per dataset
and method: ``Dice_mean`` and ``Dice_sd_seeds`` (mean and sample sd over the seeds of each seed's
mean over cases), and against the baseline (cases averaged over seeds first; see
``methods_stats``): ``diff_n`` (the cases both have: what the interval and the test rest on),
``diff_mean``, ``diff_ci_low/high``, ``ci_few_cases`` (the interval comes from fewer than
``paper_stats.FEW_CASES`` cases, the results table's flag), ``p_wilcoxon``, ``p_holm`` (Holm over
every comparison of the table: each method on each dataset) and ``significant`` (``p_holm``
below ``methods_stats.ALPHA``: only the test calls a difference significant, never an interval,
which from a handful of cases is far too narrow), and ``mean_rank`` over the datasets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from nnunet_core.report.methods_stats import ALPHA, difference_to_baseline, holm, mean_ranks
from nnunet_core.report.paper_data import TEST_SET, Run, run_frame
from nnunet_core.report.paper_stats import FEW_CASES, mean_and_sd
from nnunet_core.report.summaries import ReportInputError

METRIC = "Dice"
TEST, CROSS_VALIDATION = "test", "cross-validation"


@dataclass(frozen=True)
class MethodRun:
    """One (dataset, seed) run of one method."""

    method: str
    run: Run


def method_cases(runs: Sequence[MethodRun]) -> pd.DataFrame:
    """dataset, method, seed, case, value, evaluated_on: the Dice of each case each run has."""
    frames = []
    for entry in runs:
        frame, selected = run_frame(entry.run)
        frame = frame[frame["metric"] == METRIC]
        on_test = TEST_SET in set(frame["candidate"])
        part = frame[frame["candidate"] == (TEST_SET if on_test else selected)].copy()
        part["method"] = entry.method
        part["evaluated_on"] = TEST if on_test else CROSS_VALIDATION
        frames.append(part[["dataset", "method", "seed", "case", "value", "evaluated_on"]])
    return pd.concat(frames, ignore_index=True)


def _seed_averaged(cases: pd.DataFrame, method: str) -> pd.Series:
    return cases[cases["method"] == method].groupby("case")["value"].mean()


def dataset_rows(cases: pd.DataFrame, baseline: str, seed: int) -> list[dict]:
    """One dataset's rows, a method each (the baseline first)."""
    dataset = str(cases["dataset"].iloc[0])
    if baseline not in set(cases["method"]):
        msg = f"{dataset}: no run of the baseline method {baseline}"
        raise ReportInputError(msg)
    reference = _seed_averaged(cases, baseline)
    rows = []
    for method in dict.fromkeys([baseline, *cases["method"]]):
        part = cases[cases["method"] == method]
        per_seed = part.groupby("seed")["value"].mean()
        mean, sd = mean_and_sd(per_seed.to_numpy())
        row = {
            "dataset": dataset,
            "method": method,
            "baseline": method == baseline,
            "evaluated_on": " + ".join(sorted(set(part["evaluated_on"]))),
            "seeds": int(part["seed"].nunique()),
            "cases": int(part["case"].nunique()),
            f"{METRIC}_mean": mean,
            f"{METRIC}_sd_seeds": sd,
        }
        if method != baseline:
            diff = difference_to_baseline(_seed_averaged(cases, method), reference, seed)
            row.update(
                diff_n=diff["n"],
                diff_mean=diff["mean"],
                diff_ci_low=diff["ci_low"],
                diff_ci_high=diff["ci_high"],
                ci_few_cases=diff["n"] < FEW_CASES,
                p_wilcoxon=diff["p_value"],
            )
        rows.append(row)
    return rows


def comparison_table(cases: pd.DataFrame, baseline: str, seed: int = 0) -> pd.DataFrame:
    """Every dataset's rows, with Holm's correction over every comparison and the mean rank."""
    rows = []
    for dataset in dict.fromkeys(cases["dataset"]):
        rows += dataset_rows(cases[cases["dataset"] == dataset], baseline, seed)
    table = pd.DataFrame(rows)
    for column in ("diff_mean", "diff_ci_low", "diff_ci_high", "p_wilcoxon"):
        if column not in table:
            table[column] = math.nan
    if "diff_n" not in table:
        table["diff_n"] = pd.NA
    table["diff_n"] = table["diff_n"].astype("Int64")  # the baseline's row: empty, not 0.0
    table["ci_few_cases"] = table.get("ci_few_cases", pd.Series(False, index=table.index))
    table["ci_few_cases"] = table["ci_few_cases"].astype("boolean").fillna(False).astype(bool)
    table["p_holm"] = holm(table["p_wilcoxon"].tolist())
    table["significant"] = table["p_holm"].lt(ALPHA)  # NaN (the baseline): False
    means = {
        dataset: dict(zip(part["method"], part[f"{METRIC}_mean"], strict=True))
        for dataset, part in table.groupby("dataset", sort=False)
    }
    table["mean_rank"] = table["method"].map(mean_ranks(means))
    return table
