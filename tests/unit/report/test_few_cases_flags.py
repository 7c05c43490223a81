"""Paper statistics that do not overclaim: intervals from few cases are flagged in every table,
the comparison shows its number of cases, and only the Holm-adjusted test calls a difference
significant.

Three cases, each method 0.015 to 0.085 below the baseline: the bootstrap interval of the
difference leaves out zero, but the two-sided Wilcoxon signed-rank p of three differences of
one sign is 2/8 = 0.25, the smallest it can be. Twelve cases of one sign: p = 2/4096.
"""

from __future__ import annotations

import pandas as pd
import pytest

from nnunet_core.report.methods_comparison import comparison_table
from nnunet_core.report.methods_output import latex_table
from nnunet_core.report.paper_stats import FEW_CASES
from nnunet_core.report.paper_tables import latex_table as results_latex
from nnunet_core.report.paper_tables import write_csv

DROPS = (0.015, 0.035, 0.085)


def cases_frame(drops: tuple[float, ...]) -> pd.DataFrame:
    """One dataset, one seed: the baseline at 0.8 on every case, ``lower`` below it by ``drops``."""
    rows = []
    for k, drop in enumerate(drops):
        case = f"case_{k}"
        rows.append(("D1", "nnunet", 0, case, 0.8, "test"))
        rows.append(("D1", "lower", 0, case, 0.8 - drop, "test"))
    columns = ["dataset", "method", "seed", "case", "value", "evaluated_on"]
    return pd.DataFrame(rows, columns=columns)


def test_the_methods_comparison_from_3_test_cases_flags_its_intervals(tmp_path) -> None:
    table = comparison_table(cases_frame(DROPS), "nnunet")
    lower = table.set_index("method").loc["lower"]
    assert lower["diff_ci_high"] < 0  # the interval alone would read as a difference
    assert lower["diff_n"] == 3 and bool(lower["ci_few_cases"])
    assert lower["p_wilcoxon"] == pytest.approx(0.25)
    assert not bool(lower["significant"])
    csv = pd.read_csv(write_csv(table, tmp_path / "methods_comparison.csv"))
    assert {"diff_n", "ci_few_cases", "p_holm", "significant"} <= set(csv.columns)
    row = csv.set_index("method").loc["lower"]
    assert row["diff_n"] == 3 and bool(row["ci_few_cases"]) and not bool(row["significant"])
    text = latex_table(table)
    line = next(x for x in text.splitlines() if x.startswith("lower"))
    cells = [c.strip() for c in line.removesuffix("\\\\").split("&")]
    assert "[-0.085" in cells[1] and cells[1].endswith("]$^\\dagger$)")
    assert "$^{*}$" not in line  # no star from an interval of three cases
    assert cells[2] == "3"  # the cases column
    assert "$n$ (D1)" in text
    assert f"Interval from fewer than {FEW_CASES} cases" in text.split("\\end{tabular}")[1]


def test_enough_cases_of_one_sign_are_significant_and_unflagged() -> None:
    drops = tuple(0.01 * (k + 1) for k in range(12))
    table = comparison_table(cases_frame(drops), "nnunet")
    lower = table.set_index("method").loc["lower"]
    assert lower["diff_n"] == 12 and not bool(lower["ci_few_cases"])
    assert lower["p_holm"] == pytest.approx(2 / 4096) and bool(lower["significant"])
    text = latex_table(table)
    line = next(x for x in text.splitlines() if x.startswith("lower"))
    assert "$^{*}$" in line and "\\dagger" not in line
    assert "Interval from fewer" not in text.split("\\end{tabular}")[1]


def test_holm_counts_every_comparison_of_the_table() -> None:
    """Two datasets, two methods: four tests; 2/4096 each becomes 4 x 2/4096."""
    drops = tuple(0.01 * (k + 1) for k in range(12))
    frames = []
    for dataset in ("D1", "D2"):
        frame = cases_frame(drops).assign(dataset=dataset)
        frames += [frame, frame[frame["method"] == "lower"].assign(method="other")]
    table = comparison_table(pd.concat(frames, ignore_index=True), "nnunet")
    tested = table[~table["baseline"]]
    assert len(tested) == 4
    assert tested["p_holm"].tolist() == pytest.approx([4 * 2 / 4096] * 4)


def test_the_results_table_footnotes_its_flagged_intervals() -> None:
    row = {
        "dataset": "D1",
        "model": "2d",
        "selected": True,
        "Dice_mean": 0.8,
        "Dice_sd_seeds": 0.01,
        "Dice_ci_low": 0.7,
        "Dice_ci_high": 0.9,
        "p_wilcoxon": float("nan"),
        "favours": None,
    }
    flagged = results_latex(pd.DataFrame([{**row, "ci_few_cases": True}]), "caption")
    assert "0.900]$^\\dagger$" in flagged
    assert f"Interval from fewer than {FEW_CASES} cases" in flagged.split("\\end{tabular}")[1]
    plain = results_latex(pd.DataFrame([{**row, "ci_few_cases": False}]), "caption")
    assert "\\dagger" not in plain
