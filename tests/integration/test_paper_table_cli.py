"""``nnunet-core paper-table``: two datasets x two seeds in one table, per-dataset tables and
methods, the same bytes on a rerun, and one-line errors for a wrong ``--run``.

Dataset901_Fake and a copy renamed Dataset902_Fake (tests/helpers/paper.py: fake trees, selection
run for real, HD95/NSD in the summaries), each with seeds 0 and 1.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.paper import assert_latex_compiles, seed_tree

OTHER = "Dataset902_Fake"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    arguments = []
    for seed in (0, 1):
        run = seed_tree(tmp_path_factory.mktemp(f"seed{seed}"), seed)
        other = run.results_dir.parent / OTHER
        shutil.copytree(run.results_dir, other)
        for results in (run.results_dir, other):
            arguments.append(["--run", str(results), str(seed), str(run.test_summary)])
    return arguments


def paper_table(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnunet_core", "paper-table", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def flat(runs: list[list[str]]) -> list[str]:
    return [word for run in runs for word in run]


def test_one_table_for_both_datasets_and_seeds(runs, tmp_path: Path) -> None:
    result = paper_table(*flat(runs), "-o", str(tmp_path / "paper"))
    assert result.returncode == 0, result.stderr
    table = pd.read_csv(tmp_path / "paper" / "results_table.csv")
    assert sorted(set(table["dataset"])) == ["Dataset901_Fake", OTHER]
    assert (table["seeds"] == 2).all() and len(table) == 8  # 3 candidates + test set, each
    for column in ("Dice_sd_seeds", "HD95_mean", "NSD_ci_low", "NSD_ci_high", "p_wilcoxon"):
        assert column in table
    assert table.loc[table["model"] == "2d", "Dice_sd_seeds"].gt(0).all()
    tex = (tmp_path / "paper" / "results_table.tex").read_text()
    assert r"Dataset901\_Fake" in tex and r"Dataset902\_Fake" in tex and r"\bottomrule" in tex
    for dataset in ("Dataset901_Fake", OTHER):
        mine = pd.read_csv(tmp_path / "paper" / dataset / "results_table.csv")
        assert set(mine["dataset"]) == {dataset}
        methods = (tmp_path / "paper" / dataset / "methods.md").read_text()
        assert "with 2 seeds (0 and 1)" in methods


def test_the_same_runs_give_the_same_bytes(runs, tmp_path: Path) -> None:
    for name in ("a", "b"):
        assert paper_table(*flat(runs), "-o", str(tmp_path / name)).returncode == 0
    for path in (tmp_path / "a").rglob("*"):
        if path.is_file():
            assert (
                path.read_bytes()
                == (tmp_path / "b" / path.relative_to(tmp_path / "a")).read_bytes()
            )


def test_the_cross_dataset_table_compiles_where_tex_exists(runs, tmp_path: Path) -> None:
    assert paper_table(*flat(runs), "-o", str(tmp_path)).returncode == 0
    assert_latex_compiles((tmp_path / "results_table.tex").read_text(), tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda run: [run[0], run[1], "one"], "seed 'one' is not an integer"),
        (lambda run: [run[0], "/no/such/results", "0"], "results folder not found"),
        (lambda run: [run[0], run[1], run[2], "/no/summary.json"], "test summary"),
    ],
)
def test_a_wrong_run_is_one_line_and_exit_2(runs, tmp_path: Path, change, message) -> None:
    result = paper_table(*change(runs[0]), "-o", str(tmp_path / "out"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


def test_the_same_dataset_and_seed_twice_is_refused(runs, tmp_path: Path) -> None:
    result = paper_table(*runs[0], *runs[0], "-o", str(tmp_path / "out"))
    assert result.returncode == 2 and "given twice" in result.stderr
