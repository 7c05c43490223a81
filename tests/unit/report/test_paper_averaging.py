"""The paper table and the report give the same number for the same model, averaged as upstream's
``foreground_mean`` (per class over cases, empty classes left out, then over classes), and say so.

The test set has a class absent from reference and prediction in two of four cases (its Dice is
NaN there), the case where a per-case average and upstream's per-class average differ. A real
results tree (fake_results, selection run for real) carries it; the report is built for real.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nnunet_core.evaluation.metrics import compute_metrics_on_folder
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.results import inference_information_file
from nnunet_core.report import build_report
from nnunet_core.report.paper_data import TEST_SET, Run
from nnunet_core.report.paper_output import write_paper_tables
from tests.helpers.fake_results import FILE_ENDING, reference, write_seg_file
from tests.helpers.paper import seed_tree


def absent_class_test_set(folder: Path) -> tuple[Path, Path]:
    """References and predictions of four cases; label 2 absent from both in cases 1 and 2."""
    gt, pred = folder / "gt", folder / "pred"
    for index in range(4):
        truth = reference(index)
        if index in (1, 2):
            truth[truth == 2] = 0
        guess = truth.copy()
        ones = np.argwhere(truth == 1)
        for z, y, x in ones[: 10 * index]:  # case i misses 10 i voxels of label 1
            guess[z, y, x] = 0
        if index == 3:
            guess[guess == 2] = 0  # label 2 missed entirely: Dice 0
        write_seg_file(gt / f"t{index}{FILE_ENDING}", truth)
        write_seg_file(pred / f"t{index}{FILE_ENDING}", guess)
    return gt, pred


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, dict, Path]:
    root = tmp_path_factory.mktemp("averaging")
    run = seed_tree(root / "tree", 0)
    spec = load_dataset_json(run.results_dir.parent.parent / "preprocessed" / run.dataset /
                             "dataset.json").label_spec  # fmt: skip
    gt, pred = absent_class_test_set(root / "test")
    summary_file = root / "test" / "summary.json"
    summary = compute_metrics_on_folder(gt, pred, FILE_ENDING, spec, output_file=summary_file)
    output = root / "report"
    build_report(run.results_dir, output, summary_file)
    return Run(run.dataset, 0, run.results_dir, summary_file), summary, output


def test_test_set_row_equals_upstreams_foreground_mean_and_the_report(built) -> None:
    _run, summary, output = built
    upstream = summary["foreground_mean"]["Dice"]
    per_case = [
        np.nanmean([m["Dice"] for k, m in case["metrics"].items() if k != "0"])
        for case in summary["metric_per_case"]
    ]
    assert not math.isclose(upstream, float(np.mean(per_case)), rel_tol=1e-3)  # they differ here
    table = pd.read_csv(output / "results_table.csv").set_index("model")
    assert table.loc[TEST_SET, "Dice_mean"] == float(f"{upstream:.6g}")
    page = (output / "report.md").read_text()
    assert f"Test set: foreground-mean Dice **{upstream:.4f}**" in page
    assert "Averaging: each foreground mean is the mean over classes of each class's mean" in page


def test_cross_validation_rows_equal_each_candidates_summary(built) -> None:
    run, _summary, output = built
    info = json.loads(inference_information_file(run.results_dir).read_text())
    table = pd.read_csv(output / "results_table.csv")
    means = sorted(float(f"{v:.6g}") for v in table.loc[table["model"] != TEST_SET, "Dice_mean"])
    expected = sorted(float(f"{c['foreground_mean_dice']:.6g}") for c in info["candidates"])
    assert means == expected


def test_intervals_from_few_cases_are_flagged_and_the_caption_says_why(built) -> None:
    _run, _summary, output = built
    table = pd.read_csv(output / "results_table.csv").set_index("model")
    assert table.loc[TEST_SET, "cases"] == 4 and bool(table.loc[TEST_SET, "ci_few_cases"])
    tex = (output / "results_table.tex").read_text()
    assert r"$^\dagger$" in tex and "fewer than 10 cases" in tex
    assert "Averaging: mean over classes of each class's mean over cases" in tex


def test_methods_names_each_seeds_postprocessing_when_they_differ(built, tmp_path) -> None:
    first, _summary, _output = built
    second = seed_tree(tmp_path / "seed1", 1)
    info_file = inference_information_file(second.results_dir)
    info = json.loads(info_file.read_text())
    assert info["postprocessing"]["steps"], "seed 1 must keep a step for this test to bite"
    info["postprocessing"]["steps"] = []  # seed 1's selection kept no postprocessing
    info_file.write_text(json.dumps(info))
    runs = [first, Run(second.dataset, 1, second.results_dir, second.test_summary)]
    write_paper_tables(runs, tmp_path / "paper")
    text = (tmp_path / "paper" / first.dataset / "methods.md").read_text()
    assert "The seeds chose different postprocessing: seed 0: postprocessing kept only" in text
    assert "; seed 1: no postprocessing improved the cross-validation Dice" in text
