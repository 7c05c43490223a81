"""The statistics of the methods comparison on fixed numbers, each expectation worked by hand.

Wilcoxon (two-sided, exact): six differences of one sign are the most extreme of 2**6 sign
patterns on either side, p = 2/64 = 0.03125. Holm: the i-th smallest of m p-values times
(m - i + 1), never below the one before, at most 1.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from nnunet_core.report.methods_comparison import comparison_table
from nnunet_core.report.methods_output import latex_table
from nnunet_core.report.methods_stats import difference_to_baseline, holm, mean_ranks

CASES = [f"case_{i}" for i in range(1, 7)]


def test_holm_multiplies_by_the_tests_left_keeps_the_order_and_caps_at_one() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    adjusted = holm([0.02, math.nan, 0.5])
    assert adjusted[0] == pytest.approx(0.04) and adjusted[2] == pytest.approx(0.5)
    assert math.isnan(adjusted[1])  # not tested, not counted
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([0.2]) == [0.2]


def test_the_difference_to_the_baseline_is_paired_over_the_shared_cases() -> None:
    baseline = pd.Series([0.5] * 6 + [0.9], index=[*CASES, "only_baseline"])
    method = pd.Series([0.5 + 0.01 * k for k in range(1, 7)], index=CASES)
    result = difference_to_baseline(method, baseline)
    assert result["n"] == 6
    assert result["mean"] == pytest.approx(0.035)
    assert result["p_value"] == pytest.approx(0.03125)
    assert 0.01 <= result["ci_low"] < 0.035 < result["ci_high"] <= 0.06
    same = difference_to_baseline(baseline[CASES] - 0.02, baseline[CASES])
    assert (same["ci_low"], same["ci_high"]) == pytest.approx((-0.02, -0.02))
    assert same["p_value"] == pytest.approx(0.03125)
    assert difference_to_baseline(baseline[CASES], baseline[CASES])["p_value"] == 1.0


def test_mean_rank_ranks_each_dataset_and_averages_ties_share_their_ranks() -> None:
    means = {"D1": {"a": 0.9, "b": 0.8, "c": 0.8}, "D2": {"a": 0.7, "b": 0.75, "c": 0.6}}
    assert mean_ranks(means) == pytest.approx({"a": 1.5, "b": 1.75, "c": 2.75})


def cases_frame() -> pd.DataFrame:
    """Baseline 0.8 (seed 0) and 0.7 (seed 1) on every case of D1 and D2; ``better`` adds
    0.01 k on case k of D1 and loses 0.02 on D2; ``worse`` loses 0.1 everywhere."""
    rows = []
    for dataset in ("D1", "D2"):
        for seed, base in ((0, 0.8), (1, 0.7)):
            for k, case in enumerate(CASES, start=1):
                better = base + (0.01 * k if dataset == "D1" else -0.02)
                for method, value in (("nnunet", base), ("better", better), ("worse", base - 0.1)):
                    rows.append((dataset, method, seed, case, value, "test"))
    columns = ["dataset", "method", "seed", "case", "value", "evaluated_on"]
    return pd.DataFrame(rows, columns=columns)


def test_the_comparison_table_per_dataset_and_method() -> None:
    table = comparison_table(cases_frame(), "nnunet").set_index(["dataset", "method"])
    base = table.loc[("D1", "nnunet")]
    assert base["baseline"] and base["seeds"] == 2 and base["cases"] == 6
    assert base["Dice_mean"] == pytest.approx(0.75)
    assert base["Dice_sd_seeds"] == pytest.approx(np.sqrt(0.005))  # 0.8 and 0.7
    assert math.isnan(base["p_wilcoxon"]) and math.isnan(base["p_holm"])
    better = table.loc[("D1", "better")]
    assert better["Dice_mean"] == pytest.approx(0.785)
    assert better["diff_mean"] == pytest.approx(0.035)
    assert better["p_wilcoxon"] == pytest.approx(0.03125)
    assert table.loc[("D2", "better"), "diff_mean"] == pytest.approx(-0.02)
    # four comparisons (2 methods x 2 datasets), each 0.03125 -> 0.125 after Holm over the table
    assert table.loc[("D1", "better"), "p_holm"] == pytest.approx(0.125)
    assert table.loc[("D2", "worse"), "p_holm"] == pytest.approx(0.125)
    assert not table["significant"].any()
    # D1: better 1, nnunet 2, worse 3; D2: nnunet 1, better 2, worse 3
    ranks = table.groupby("method")["mean_rank"].first()
    assert ranks.to_dict() == pytest.approx({"nnunet": 1.5, "better": 1.5, "worse": 3.0})
    assert list(table.index.get_level_values("method")[:3]) == ["nnunet", "better", "worse"]


def test_the_latex_table_has_a_row_per_method_and_a_column_per_dataset() -> None:
    text = latex_table(comparison_table(cases_frame(), "nnunet"))
    assert "\\toprule" in text and "Mean rank" in text
    row = next(line for line in text.splitlines() if line.startswith("better"))
    assert "0.785 $\\pm$ 0.071" in row and "$\\Delta$ +0.035" in row and "1.50" in row
    assert "$^{*}$" not in row  # 0.125 after Holm
    assert "nnunet (baseline)" in text
