"""Methods compared in paper mode (config ``methods``), real Snakemake on a tiny schedule.

Two methods (upstream's trainer, the baseline, and its no-mirroring variant) x two 2-D datasets
(one with a labelled test set, one without: the comparison uses the cross-validation of each
run's selected model there), one seed, one fold of one epoch of 2 iterations. (Seeds: the spread
over seeds of a method is the methods-table command's, test_methods_table_cli.py; each (dataset,
seed, method) being a run of its own, tests/unit/workflow/test_workflow_methods.py; several
seeds through the workflow, test_workflow_paper.py.) Each dataset is planned and preprocessed
once for both methods; each method trains in its own tree (of one seed: results/<method>/<D>);
the comparison table (CSV, LaTeX) and a figure per dataset are written. Adding a third method to the
config (one with its own planner: a user's planner file, a fixed patch larger than the images)
and rerunning plans, preprocesses, trains and predicts only that method's jobs and redoes the
comparison, nothing of the other two. `snakemake reproduce` packs every method (a
reader's rerun from an archive, byte for byte, is tested on the single run of
test_workflow_pipeline.py, where it is the fault campaign's chain).
"""

from __future__ import annotations

import json
import tarfile

import pandas as pd
import pytest

from tests.helpers.paper import assert_latex_compiles
from tests.helpers.user_planners import PATCH_EDGE, PLANNER_CLASS, PLANS_NAME, write_planner
from tests.helpers.workflow import job_counts, snakemake, tiny_config

pytestmark = pytest.mark.slow

LABELLED, UNLABELLED = "Dataset911_Alpha", "Dataset912_Beta"
SEEDS = (0,)
BASELINE = {"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True}
NO_MIRRORING = {"name": "nomirror", "trainer": "nnUNetTrainerNoMirroring"}
# its own planner, a user's file (tests/helpers/user_planners.py): its own plans and data
THIRD = {"name": "bigpatch", "trainer": "nnUNetTrainerNoDeepSupervision"}
STAGES = ("train", "crossval", "select", "report")


@pytest.fixture(scope="module")
def methods_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("methods")
    config = tiny_config(workdir / "work")
    synthetic = config.pop("dataset")["synthetic"]
    del config["seed"]
    planar = {**synthetic, "shape": [32, 32], "spacing": [0.8, 0.8], "num_training": 5}
    config["datasets"] = [
        {"id": 911, "name": "Alpha", "synthetic": {**planar, "num_test": 2}},
        {"id": 912, "name": "Beta", "synthetic": {**planar, "num_test": 0, "seed": 3}},
    ]
    config["seeds"] = list(SEEDS)
    config["planning"]["configurations"] = ["2d"]
    config["methods"] = [BASELINE, NO_MIRRORING]
    config["training"].update(
        folds=[0], epochs=1, iterations_per_epoch=2, val_iterations_per_epoch=1
    )
    config["deterministic"] = True
    result = snakemake(workdir, config, "all")
    return workdir / "work", config, workdir, result


def test_each_dataset_is_planned_once_and_each_method_trains(methods_run) -> None:
    work, _, _, result = methods_run
    counts = job_counts(result.stdout + result.stderr)
    for dataset in (LABELLED, UNLABELLED):
        for rule in ("verify_dataset", "fingerprint", "plan", "splits", "preprocess"):
            assert counts.get(f"{dataset}_seed0_nnunet_{rule}") == 1, (rule, counts)
            assert not any(k.endswith(f"nomirror_{rule}") for k in counts), counts
        for seed in SEEDS:
            for method in ("nnunet", "nomirror"):
                for rule in STAGES:
                    assert counts[f"{dataset}_seed{seed}_{method}_{rule}"] == 1, rule
    assert counts["methods_table"] == 1 and counts["paper_tables"] == 1
    assert "nnUNetTrainerNoMirroring -p nnUNetPlans" in result.stdout + result.stderr
    model = "nnUNetTrainerNoMirroring__nnUNetPlans__2d"
    assert (work / "results" / "nomirror" / UNLABELLED / model / "fold_0").is_dir()
    assert (work / "predictions" / "nnunet" / LABELLED / "test_summary.json").is_file()


def test_the_comparison_table_has_every_method_on_every_dataset(methods_run, tmp_path) -> None:
    work, _, _, _ = methods_run
    table = pd.read_csv(work / "paper" / "methods_comparison.csv")
    assert list(zip(table["dataset"], table["method"], strict=True)) == [
        (LABELLED, "nnunet"), (LABELLED, "nomirror"),
        (UNLABELLED, "nnunet"), (UNLABELLED, "nomirror"),
    ]  # fmt: skip
    assert (table["seeds"] == 1).all()
    assert list(table["evaluated_on"]) == ["test", "test", "cross-validation"] + [
        "cross-validation"
    ]
    assert list(table["cases"]) == [2, 2, 1, 1]  # test cases; fold 0's validation case
    other = table[table["method"] == "nomirror"]
    assert other["diff_mean"].notna().all()
    assert (other["diff_ci_low"] <= other["diff_mean"] + 1e-9).all()
    assert (other["diff_mean"] <= other["diff_ci_high"] + 1e-9).all()
    assert other["p_holm"].between(0, 1).all()
    assert (other["p_holm"] >= other["p_wilcoxon"] - 1e-12).all()
    assert set(table["mean_rank"]) <= {1.0, 1.5, 2.0}
    assert table.groupby("method")["mean_rank"].nunique().eq(1).all()
    # 2 and 1 cases: every interval flagged, nothing called significant by it
    assert other["diff_n"].tolist() == [2, 1] and other["ci_few_cases"].all()
    assert not table["significant"].any()
    body = (work / "paper" / "methods_comparison.tex").read_text()
    assert "nnunet (baseline)" in body and "Mean rank" in body
    assert f"$n$ ({LABELLED.replace('_', chr(92) + '_')})" in body
    assert "Interval from fewer than 10 cases" in body
    assert_latex_compiles(body, tmp_path)
    for dataset in (LABELLED, UNLABELLED):
        for kind in ("png", "pdf", "svg"):
            figure = work / "paper" / dataset / f"methods_dice.{kind}"
            assert figure.stat().st_size > 1000, figure
        methods = (work / "paper" / dataset / "methods.md").read_text()  # every method
        assert "- **nnunet** (baseline): trainer nnUNetTrainer" in methods, methods
        assert "- **nomirror**: trainer nnUNetTrainerNoMirroring" in methods, methods


def test_the_reproduce_archive_holds_every_method(methods_run) -> None:
    work, config, workdir, _ = methods_run
    snakemake(workdir, config, "reproduce")
    with tarfile.open(work / "reproduce.tar.gz") as packed:
        names = set(packed.getnames())
        manifest = json.loads(packed.extractfile("manifest.json").read())
        commands = packed.extractfile("commands.sh").read().decode()
    assert "expected/paper/methods_comparison.csv" in names
    assert "expected/paper/methods_comparison.tex" in names
    for method in ("nnunet", "nomirror"):
        for dataset in (LABELLED, UNLABELLED):
            table = f"expected/results/{method}/{dataset}/report/results_table.csv"
            assert table in names, sorted(names)
    assert "nnUNetTrainerNoMirroring" in commands
    assert len(manifest["datasets"]) == 4  # 2 datasets x 2 methods


def test_adding_a_method_trains_only_its_jobs_and_redoes_the_comparison(methods_run) -> None:
    work, config, workdir, _ = methods_run
    table = work / "paper" / "methods_comparison.csv"
    baseline_table = (work / "paper" / "results_table.csv").read_bytes()
    checkpoint = (
        work / "results" / "nomirror" / LABELLED
        / "nnUNetTrainerNoMirroring__nnUNetPlans__2d" / "fold_0" / "checkpoint_final.pth"
    )  # fmt: skip
    before = checkpoint.stat().st_mtime_ns
    third = {**THIRD, "planner": write_planner(workdir / "my_planners")}
    more = {**config, "methods": [BASELINE, third, NO_MIRRORING]}
    result = snakemake(workdir, more, "all")
    counts = job_counts(result.stdout + result.stderr)
    assert counts.pop("methods_table") == 1 and counts.pop("all") == 1, counts
    assert counts, "the new method trained nothing"
    assert all("_bigpatch_" in rule for rule in counts), counts
    for dataset in (LABELLED, UNLABELLED):
        # its own plans and, named after them, its own data
        assert counts[f"{dataset}_seed0_bigpatch_plan"] == 1
        assert counts[f"{dataset}_seed0_bigpatch_preprocess"] == 1
        for seed in SEEDS:
            assert counts[f"{dataset}_seed{seed}_bigpatch_train"] == 1
        assert (work / "logs" / dataset / f"plan_{PLANS_NAME}.log").is_file()
        plans = json.loads((work / "preprocessed" / dataset / f"{PLANS_NAME}.json").read_text())
        assert plans["experiment_planner_used"] == PLANNER_CLASS
        assert plans["planner_source"]["class"] == PLANNER_CLASS
        assert plans["configurations"]["2d"]["patch_size"] == [PATCH_EDGE] * 2
        model = work / "results" / "bigpatch" / dataset / f"{THIRD['trainer']}__{PLANS_NAME}__2d"
        assert (
            json.loads((model / "plans.json").read_text())["planner_source"]
            == plans["planner_source"]
        )  # the model's own copy of the plans records the planner
    assert (work / "predictions" / "bigpatch" / LABELLED / "test_summary.json").is_file()
    assert checkpoint.stat().st_mtime_ns == before
    assert (work / "paper" / "results_table.csv").read_bytes() == baseline_table
    assert list(dict.fromkeys(pd.read_csv(table)["method"])) == ["nnunet", "bigpatch", "nomirror"]
    again = snakemake(workdir, more, "all")
    assert "Nothing to be done" in again.stdout + again.stderr
