"""The paper's results table from two seeds of a fake results tree, selection run for real.

Seed 0 and seed 1 are two results trees of the same dataset (fake_results: six cases, two
configurations, their ensemble); cross-validation summaries carry HD95 and NSD. The table must
give each candidate's mean over seeds with the seeds' spread, a bootstrap interval over cases
that holds the mean, and the Wilcoxon test of the selected model against the others; the same
input gives the same CSV bytes; the LaTeX table is booktabs and compiles where pdflatex exists.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from nnunet_core.report.paper_data import TEST_SET, Run, run_frame
from nnunet_core.report.paper_stats import bootstrap_ci, paired_test
from nnunet_core.report.paper_tables import latex_table, results_table, write_csv
from tests.helpers.fake_results import SPLITS
from tests.helpers.paper import seed_tree


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Run]:
    return [seed_tree(tmp_path_factory.mktemp(f"seed{s}"), s) for s in (0, 1)]


@pytest.fixture(scope="module")
def table(runs: list[Run]) -> pd.DataFrame:
    frames, selections = [], {}
    for run in runs:
        frame, selected = run_frame(run)
        frames.append(frame)
        selections.setdefault(run.dataset, []).append(selected)
    return results_table(frames, selections)


def test_one_row_per_candidate_and_the_test_set(table: pd.DataFrame) -> None:
    assert list(table["model"]) == ["3d_fullres", "2d", "3d_fullres + 2d", TEST_SET]
    assert table.loc[table["selected"], "model"].tolist() == ["3d_fullres"]
    assert (table["seeds"] == 2).all()
    assert table.set_index("model").loc["2d", "cases"] == len({c for s in SPLITS for c in s["val"]})
    for metric in ("Dice", "HD95", "NSD"):
        assert {f"{metric}_mean", f"{metric}_sd_seeds", f"{metric}_ci_low"} <= set(table)


def test_means_spread_and_intervals(table: pd.DataFrame) -> None:
    rows = table.set_index("model")
    worse = rows.loc["2d"]
    # seed 1's 2d misses more voxels: the seeds differ, so the spread is positive
    assert worse["Dice_sd_seeds"] > 0 and worse["Dice_mean"] < rows.loc["3d_fullres", "Dice_mean"]
    for _, row in table.iterrows():
        for metric in ("Dice", "NSD", "HD95"):
            assert row[f"{metric}_ci_low"] <= row[f"{metric}_mean"] + 1e-9
            assert row[f"{metric}_mean"] <= row[f"{metric}_ci_high"] + 1e-9
    assert rows.loc["3d_fullres", "NSD_mean"] > worse["NSD_mean"]


def test_selected_model_is_compared_with_each_other_candidate(table: pd.DataFrame) -> None:
    rows = table.set_index("model")
    assert np.isnan(rows.loc["3d_fullres", "p_wilcoxon"]) and np.isnan(
        rows.loc[TEST_SET, "p_wilcoxon"]
    )
    worse = rows.loc["2d"]
    assert 0 < worse["p_wilcoxon"] < 0.05 and worse["favours"] == "selected"
    assert worse["median_difference"] > 0


def test_same_input_gives_the_same_csv_bytes(
    runs: list[Run], table: pd.DataFrame, tmp_path
) -> None:
    frames, selections = [], {}
    for run in runs:
        frame, selected = run_frame(run)
        frames.append(frame)
        selections.setdefault(run.dataset, []).append(selected)
    first = write_csv(table, tmp_path / "a.csv").read_bytes()
    second = write_csv(results_table(frames, selections), tmp_path / "b.csv").read_bytes()
    assert first == second


def test_latex_is_booktabs_and_compiles_where_tex_exists(table: pd.DataFrame, tmp_path) -> None:
    text = latex_table(table, "Cross-validation results")
    assert r"\toprule" in text and r"\midrule" in text and r"\bottomrule" in text
    assert r"Dataset901\_Fake" in text and r"$\star$" in text and "HD95 (mm)" in text
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip("no pdflatex on this machine: the LaTeX table was checked as text only")
    document = (
        "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
        + text
        + "\\end{document}\n"
    )
    (tmp_path / "table.tex").write_text(document)
    result = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "table.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert (tmp_path / "table.pdf").stat().st_size > 0


def test_bootstrap_is_seeded_and_holds_the_mean() -> None:
    values = np.random.default_rng(3).normal(0.8, 0.05, 30)
    assert bootstrap_ci(values, seed=1) == bootstrap_ci(values, seed=1)
    low, high = bootstrap_ci(values, seed=1)
    assert low < values.mean() < high and high - low < 0.05
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)


def test_paired_test_direction_follows_the_metric() -> None:
    base = np.linspace(1, 2, 12)
    assert paired_test(base + 0.1, base, "Dice")["favours"] == "selected"
    assert paired_test(base + 0.1, base, "HD95")["favours"] == "other"
    assert paired_test(base, base, "Dice") == {
        "n": 12, "p_value": 1.0, "median_difference": 0.0, "favours": "neither"
    }  # fmt: skip
