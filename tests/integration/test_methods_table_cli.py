"""``nnunet-core methods-table``: two methods x two seeds of one dataset from fake results trees
(tests/helpers/paper.py, selection run for real); the same bytes on a rerun; one-line errors.

The ``copy`` method's trees are copies of the baseline's: every paired difference is 0, so its
difference is 0 with the interval [0, 0], p = 1, and the two methods share rank 1.5.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.paper import seed_tree

DATASET = "Dataset901_Fake"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    words = ["--baseline", "nnunet"]
    for seed in (0, 1):
        run = seed_tree(tmp_path_factory.mktemp(f"seed{seed}"), seed)
        copy = run.results_dir.parent.parent / "copy" / DATASET
        shutil.copytree(run.results_dir, copy)
        words += ["--run", "nnunet", str(run.results_dir), str(seed), str(run.test_summary)]
        words += ["--run", "copy", str(copy), str(seed), str(run.test_summary)]
    return words


def methods_table(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnunet_core", "methods-table", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_table_figures_and_the_same_bytes_on_a_rerun(runs, tmp_path: Path) -> None:
    for name in ("a", "b"):
        result = methods_table(*runs, "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
    table = pd.read_csv(tmp_path / "a" / "methods_comparison.csv")
    assert list(table["method"]) == ["nnunet", "copy"]
    assert list(table["evaluated_on"]) == ["test", "test"] and (table["seeds"] == 2).all()
    assert table["Dice_sd_seeds"].notna().all()  # the spread over the two seeds
    copy = table.iloc[1]
    assert (copy["diff_mean"], copy["diff_ci_low"], copy["diff_ci_high"]) == (0, 0, 0)
    assert copy["p_wilcoxon"] == 1 and copy["p_holm"] == 1
    assert list(table["mean_rank"]) == [1.5, 1.5]
    for kind in ("png", "pdf", "svg"):
        assert (tmp_path / "a" / DATASET / f"methods_dice.{kind}").is_file()
    for path in (tmp_path / "a").rglob("*"):
        if path.is_file():
            assert (
                path.read_bytes()
                == (tmp_path / "b" / path.relative_to(tmp_path / "a")).read_bytes()
            )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: ["--baseline", "other", *w[2:]], "--baseline other: no --run of that method"),
        (lambda w: [*w, *w[2:7]], "method nnunet on dataset Dataset901_Fake with seed 0 given"),
        (lambda w: [*w, "--run", "x", "0"], "expected METHOD RESULTS_DIR SEED"),
        (lambda w: [*w, "--run", "x", "/no/such/results", "0"], "results folder not found"),
    ],
)  # fmt: skip
def test_a_wrong_run_is_one_line_and_exit_2(runs, tmp_path: Path, change, message) -> None:
    result = methods_table(*change(runs), "-o", str(tmp_path / "out"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()
