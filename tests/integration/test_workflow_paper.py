"""Several datasets and seeds in one workflow run (real Snakemake, tiny schedule).

A 3-D dataset (2d and 3d_fullres, upstream's planner) and a 2-D dataset (its own planner, ResEncM)
x seeds 0 and 1, fold 0 of each, in one run: each dataset is checked, planned and preprocessed
once, every (dataset, seed) trains, selects, predicts and reports in its own tree, and the table
across datasets has both, with the spread over the two seeds, bootstrap intervals and the paired
test. (Surface metrics are off here: HD95 and NSD in the table across datasets and seeds are
checked on real summaries by test_paper_table_cli.py, and their flags reaching a run's jobs by
test_workflow_pipeline.py; each costs its jobs MONAI's import.) Deleting one fold of one dataset
and seed reruns that fold and what depends on it, nothing of the other dataset or seed.
`snakemake reproduce` packs every run (a reader's rerun from an archive on a fresh checkout is
tested on the single run of test_workflow_pipeline.py, where it is the fault campaign's chain).
"""

from __future__ import annotations

import json
import tarfile

import pandas as pd
import pytest

from tests.helpers.paper import assert_latex_compiles
from tests.helpers.workflow import job_counts, snakemake, tiny_config

pytestmark = pytest.mark.slow

VOLUME, PLANAR = "Dataset901_Volume", "Dataset902_Planar"
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("paper")
    config = tiny_config(workdir / "work")
    synthetic = config.pop("dataset")["synthetic"]
    del config["seed"], config["planning"]
    config["datasets"] = [
        {"id": 901, "name": "Volume", "synthetic": synthetic,
         "planning": {"configurations": ["2d", "3d_fullres"]}},
        {"id": 902, "name": "Planar",
         "synthetic": {**synthetic, "shape": [32, 32], "spacing": [0.8, 0.8]},
         "planning": {"planner": "ResEncM"}},
    ]  # fmt: skip
    config["seeds"] = list(SEEDS)
    config["training"].update(
        folds=[0], epochs=1, iterations_per_epoch=2, val_iterations_per_epoch=1
    )
    config["deterministic"] = True
    result = snakemake(workdir, config, "all")
    return workdir / "work", config, workdir, result


def _counts(result) -> dict[str, int]:
    return job_counts(result.stdout + result.stderr)


def test_each_dataset_is_prepared_once_and_each_seed_trains(paper_run) -> None:
    _, _, _, result = paper_run
    counts = _counts(result)
    for dataset in (VOLUME, PLANAR):
        for rule in ("verify_dataset", "fingerprint", "plan", "splits"):
            assert counts.get(f"{dataset}_seed0_{rule}") == 1, (rule, counts)
            assert f"{dataset}_seed1_{rule}" not in counts, counts  # the seeds share it
    assert counts[f"{VOLUME}_seed0_preprocess"] == 2  # 2d and 3d_fullres data
    assert counts[f"{PLANAR}_seed0_preprocess"] == 1
    for seed in SEEDS:
        assert counts[f"{VOLUME}_seed{seed}_train"] == 2  # 2 configurations x fold 0
        assert counts[f"{PLANAR}_seed{seed}_train"] == 1
        for dataset in (VOLUME, PLANAR):
            for rule in ("select", "evaluate_test", "report"):
                assert counts[f"{dataset}_seed{seed}_{rule}"] == 1, (dataset, rule, counts)
    assert counts["paper_tables"] == 1


def test_every_run_keeps_its_own_upstream_tree(paper_run) -> None:
    work, _, _, result = paper_run
    output = result.stdout + result.stderr
    planar_model = "nnUNetTrainer__nnUNetResEncUNetMPlans__2d"
    assert (work / "preprocessed" / PLANAR / "nnUNetResEncUNetMPlans.json").is_file()
    for seed in SEEDS:
        results = work / "results" / f"seed_{seed}"
        for dataset, model in ((VOLUME, "nnUNetTrainer__nnUNetPlans__3d_fullres"),
                               (PLANAR, planar_model)):  # fmt: skip
            fold = results / dataset / model / "fold_0"
            assert (fold / "checkpoint_final.pth").is_file()
            assert (results / dataset / "inference_information.json").is_file()
            predictions = work / "predictions" / f"seed_{seed}" / dataset
            assert len(list((predictions / "final").glob("*.nii.gz"))) == 2
            assert (predictions / "test_summary.json").is_file()
            assert (work / "logs" / f"seed_{seed}" / dataset / "report.log").is_file()
        assert f"--seed {seed} " in output
        assert f"--results work/results/seed_{seed}" in output.replace(str(work), "work")
    # the seeds trained different models from the same data
    first, second = (
        (work / "results" / f"seed_{s}" / VOLUME / "nnUNetTrainer__nnUNetPlans__2d" / "fold_0"
         / "checkpoint_final.pth").read_bytes()
        for s in SEEDS
    )  # fmt: skip
    assert first != second


def test_the_table_across_datasets_has_both_seeds_and_statistics(paper_run) -> None:
    work, _, _, _ = paper_run
    table = pd.read_csv(work / "paper" / "results_table.csv")
    assert set(table["dataset"]) == {VOLUME, PLANAR}
    assert (table["seeds"] == 2).all()
    for suffix in ("mean", "sd_seeds", "ci_low", "ci_high"):
        assert f"Dice_{suffix}" in table.columns
    assert table["Dice_sd_seeds"].notna().all()
    assert (table["Dice_ci_low"] <= table["Dice_mean"] + 1e-9).all()
    volume = table[(table["dataset"] == VOLUME) & (table["evaluated_on"] == "cross-validation")]
    assert set(volume["model"]) == {"2d", "3d_fullres", "2d + 3d_fullres"}
    assert volume["selected"].sum() == 1
    others = volume[~volume["selected"]]
    assert others["p_wilcoxon"].between(0, 1).all() and others["favours"].notna().all()
    assert set(table[table["evaluated_on"] == "test"]["dataset"]) == {VOLUME, PLANAR}
    for dataset in (VOLUME, PLANAR):
        own = pd.read_csv(work / "paper" / dataset / "results_table.csv")
        assert set(own["dataset"]) == {dataset}
        methods = (work / "paper" / dataset / "methods.md").read_text()
        assert "2 seeds (0 and 1)" in methods, methods
        assert "trained for 1 epoch of 2 iterations" in methods, methods
    assert "nnUNetResEncUNetMPlans" in (work / "paper" / PLANAR / "methods.md").read_text()


def test_the_latex_table_across_datasets_compiles_where_tex_exists(paper_run, tmp_path) -> None:
    work, _, _, _ = paper_run
    body = (work / "paper" / "results_table.tex").read_text()
    assert "\\toprule" in body and "Planar" in body and "Volume" in body
    assert_latex_compiles(body, tmp_path)


def test_a_profiles_resources_by_rule_name_reach_every_runs_rule(paper_run) -> None:
    """profiles/slurm sets the train rule's partition, memory and stop signal by its name."""
    _, config, workdir, _ = paper_run
    rule = f"{PLANAR}_seed1_train"
    dry = snakemake(
        workdir, config, "-n", "--forcerun", rule, "--set-resources", "train:mem_mb=12345"
    )
    output = dry.stdout + dry.stderr
    block = output[output.index(f"rule {rule}:") :]
    block = block[: block.index("Shell command")]
    assert "mem_mb=12345" in block, block
    other = output[output.index(f"rule {PLANAR}_seed1_crossval:") :]
    assert "mem_mb=12345" not in other[: other.index("Shell command")]


def test_deleting_one_fold_of_one_dataset_and_seed_reruns_only_what_depends_on_it(
    paper_run,
) -> None:
    work, config, workdir, _ = paper_run
    table = work / "paper" / "results_table.csv"
    fold = work / "results" / "seed_1" / VOLUME / "nnUNetTrainer__nnUNetPlans__2d" / "fold_0"
    (fold / "checkpoint_final.pth").unlink()
    result = snakemake(workdir, config, "all")
    counts = _counts(result)
    assert counts.pop(f"{VOLUME}_seed1_train") == 1, counts
    assert counts.pop(f"{VOLUME}_seed1_crossval") == 1, counts  # 2d only
    assert f"nnunet-core train {VOLUME} 2d 0 " in result.stdout + result.stderr
    information = work / "results" / "seed_1" / VOLUME / "inference_information.json"
    selected = json.loads(information.read_text())["best_model_or_ensemble"]
    members = len(selected["selected_model_or_models"])
    assert counts.pop(f"{VOLUME}_seed1_predict") == members, counts  # the test set again
    assert counts.pop("paper_tables") == 1 and counts.pop("all") == 1, counts
    rest = {"ensemble_cv", "select", "postprocess", "evaluate_test", "report"}
    if members == 2:
        rest.add("ensemble_predictions")
    assert counts == {f"{VOLUME}_seed1_{rule}": 1 for rule in rest}, counts
    assert (fold / "checkpoint_final.pth").is_file() and table.is_file()
    again = snakemake(workdir, config, "all")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_the_reproduce_archive_holds_every_dataset_and_seed(paper_run) -> None:
    work, config, workdir, _ = paper_run
    snakemake(workdir, config, "reproduce")
    with tarfile.open(work / "reproduce.tar.gz") as packed:
        names = set(packed.getnames())
        manifest = json.loads(packed.extractfile("manifest.json").read())
    for dataset in (VOLUME, PLANAR):
        assert f"expected/paper/{dataset}/results_table.csv" in names
        assert any(n.startswith(f"{dataset}/imagesTr/") for n in manifest["raw_sha256"])
        for seed in SEEDS:
            assert f"expected/results/seed_{seed}/{dataset}/report/results_table.csv" in names
    assert "expected/paper/results_table.csv" in names
    assert "expected/preprocessed/Dataset902_Planar/nnUNetResEncUNetMPlans.json" in names
