"""Methods in paper mode (config ``methods``): every (dataset, seed, method) is a run with its own
trainer, planner and configurations, filed under the method's name, and adding a method leaves
the runs of the others exactly as they were (their names, configs and files)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.config import schema_errors
from nnunet_core.workflow.paper_rules import shared_rule_order
from nnunet_core.workflow.runs import (
    check_run_keys,
    is_several_runs,
    methods_table_flags,
    run_instances,
)
from tests.helpers.workflow import REPO, SCHEMA

BASELINE = {"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True}
NO_MIRRORING = {"name": "nomirror", "trainer": "nnUNetTrainerNoMirroring"}
RESENC = {
    "name": "resenc", "trainer": "my_pkg.losses:FocalTrainer", "planner": "ResEncM",
    "configurations": ["2d"],
}  # fmt: skip


def methods_config(*methods: dict, seeds=(0, 1)) -> dict:
    return {
        "work_dir": "w",
        "datasets": [
            {
                "id": 901,
                "name": "Liver",
                "raw_root": "/data/raw",
                "planning": {"configurations": ["3d_fullres"]},
            },
            {"id": 902, "name": "Hippo", "raw_root": "/data/raw"},
        ],
        "seeds": list(seeds),
        "planning": {"planner": "default"},
        "training": {"epochs": 3, "trainer": "nnUNetTrainer"},
        "methods": [dict(m) for m in methods],
    }


def test_every_dataset_seed_and_method_is_a_run_the_baseline_first() -> None:
    runs = run_instances(methods_config(NO_MIRRORING, BASELINE))
    assert [r.name for r in runs[:4]] == [
        "Dataset901_Liver_seed0_nnunet", "Dataset901_Liver_seed0_nomirror",
        "Dataset901_Liver_seed1_nnunet", "Dataset901_Liver_seed1_nomirror",
    ]  # fmt: skip
    assert len(runs) == 8
    assert [r.baseline for r in runs[:2]] == [True, False]
    mirror = runs[1].config
    assert mirror["training"] == {"epochs": 3, "trainer": "nnUNetTrainerNoMirroring"}
    assert mirror["method"] == {"name": "nomirror", "writes_dataset_json": True}
    assert "methods" not in mirror
    # the dataset's planning where the method sets none
    assert mirror["planning"] == {"planner": "default", "configurations": ["3d_fullres"]}
    for run in runs:
        assert schema_errors(run.config, SCHEMA) == [], run.name


def test_a_method_sets_its_own_trainer_planner_and_configurations() -> None:
    runs = run_instances(methods_config(BASELINE, RESENC, seeds=[0]))
    resenc = next(r for r in runs if r.name == "Dataset902_Hippo_seed0_resenc")
    assert resenc.config["training"]["trainer"] == "my_pkg.losses:FocalTrainer"
    assert resenc.config["planning"] == {"planner": "ResEncM", "configurations": ["2d"]}
    assert resenc.plans_name() == "nnUNetResEncUNetMPlans"
    # its plan job writes the dataset's dataset.json too: only the baseline's plan declares it
    assert resenc.config["method"]["writes_dataset_json"] is False
    assert all(r.config["method"]["writes_dataset_json"] for r in runs if r.method != "resenc")


def test_each_method_has_its_own_trees_and_shares_the_preprocessed_data() -> None:
    runs = run_instances(methods_config(BASELINE, NO_MIRRORING))
    tree = runs[3].tree  # Liver, seed 1, nomirror
    assert tree.results_dir == Path("w/results/nomirror/seed_1/Dataset901_Liver")
    assert tree.predictions_dir == Path("w/predictions/nomirror/seed_1/Dataset901_Liver")
    assert tree.logs == Path("w/logs/nomirror/seed_1/Dataset901_Liver")
    assert tree.dataset_logs == Path("w/logs/Dataset901_Liver")
    assert tree.roots.preprocessed == Path("w/preprocessed")
    one_seed = run_instances(methods_config(BASELINE, NO_MIRRORING, seeds=[4]))
    assert one_seed[0].tree.results_dir == Path("w/results/nnunet/Dataset901_Liver")


def test_adding_a_method_leaves_the_other_runs_as_they_were() -> None:
    before = run_instances(methods_config(BASELINE, NO_MIRRORING))
    after = run_instances(methods_config(BASELINE, RESENC, NO_MIRRORING))
    kept = {r.name: r for r in after}
    for run in before:
        assert kept[run.name].config == run.config
        assert kept[run.name].tree == run.tree
    assert len(after) - len(before) == 4


def test_methods_make_a_paper_run_even_of_one_dataset_and_seed() -> None:
    config = {"dataset": {"id": 4, "name": "H"}, "seed": 0, "methods": [BASELINE]}
    assert is_several_runs(config)
    assert [r.name for r in run_instances(config)] == ["Dataset004_H_seed0_nnunet"]


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ([NO_MIRRORING], "mark exactly one method baseline: true (found: none)"),
        ([BASELINE, {**NO_MIRRORING, "baseline": True}],
         "mark exactly one method baseline: true (found: nnunet, nomirror)"),
        ([BASELINE, {**NO_MIRRORING, "name": "nnunet"}], "name nnunet given twice"),
        ([BASELINE, {**NO_MIRRORING, "trainer": " "}], "methods[1] (nomirror): trainer"),
        ([BASELINE, {**NO_MIRRORING, "name": "no-mirror"}], "methods[1]: name 'no-mirror'"),
    ],
)  # fmt: skip
def test_a_wrong_methods_list_is_one_line(methods: list, message: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^config methods") as caught:
        check_run_keys(methods_config(*methods))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_method_is_not_set_by_hand() -> None:
    config = {**methods_config(BASELINE), "method": {"name": "nnunet"}}
    with pytest.raises(ConfigurationError, match="method is set per run from methods:"):
        check_run_keys(config)


def test_the_schema_names_a_methods_missing_trainer_and_an_unknown_key() -> None:
    config = methods_config(BASELINE, {"name": "x", "loss": "focal"})
    errors = schema_errors(config, SCHEMA)
    assert any(e.startswith("methods.1: 'trainer' is a required property") for e in errors)
    assert any(e.startswith("methods.1.loss: unknown key") for e in errors), errors


def test_the_methods_table_gets_every_run_and_the_baseline() -> None:
    runs = run_instances(methods_config(BASELINE, NO_MIRRORING))
    words = shlex.split(methods_table_flags(runs))
    assert words[:2] == ["--baseline", "nnunet"]
    assert words.count("--run") == 8
    first = words.index("--run")
    assert words[first + 1 : first + 4] == [
        "nnunet",
        "w/results/nnunet/seed_0/Dataset901_Liver",
        "0",
    ]


def test_a_later_planner_gives_way_for_the_files_both_planners_write() -> None:
    """Two methods with their own planners both write the dataset's dataset.json."""
    outputs = {
        "a_plan": ["pre/D/nnUNetPlans.json", "pre/D/dataset.json"],
        "b_plan": ["pre/D/nnUNetResEncUNetMPlans.json", "pre/D/dataset.json"],
        "a_train": ["res/a/fold_0"],
        "b_train": ["res/b/fold_0"],
    }
    rules = {"a": {"plan", "train"}, "b": {"plan", "train"}}
    assert shared_rule_order(["a", "b"], rules, outputs.__getitem__) == [("a_plan", "b_plan")]


def test_the_documented_methods_example_is_a_valid_config_of_eighteen_runs() -> None:
    text = (REPO / "docs" / "paper-mode.md").read_text()
    section = text[text.index("## Methods compared against a baseline") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    config = yaml.safe_load(section[start : section.index("```", start)])
    assert schema_errors(config, SCHEMA) == []
    check_run_keys(config)
    runs = run_instances(config)
    assert len(runs) == 18 and runs[5].name == "Dataset004_Hippocampus_seed1_resenc"
    assert runs[5].config["planning"] == {"configurations": ["3d_fullres"], "planner": "ResEncM"}
    assert runs[5].tree.results_dir == Path("work/results/resenc/seed_1/Dataset004_Hippocampus")


def test_the_reproduce_archive_expects_every_planners_plans_and_the_comparison() -> None:
    from nnunet_core.workflow.reproduce import PackedRun, expected_files

    work, raw = Path("w"), Path("w/raw/Dataset004_H")
    runs = [
        PackedRun(raw, "nnUNetPlans", work / "results/nnunet/seed_0/Dataset004_H"),
        PackedRun(raw, "nnUNetPlans", work / "results/nomirror/seed_0/Dataset004_H"),
        PackedRun(raw, "nnUNetResEncUNetMPlans", work / "results/resenc/seed_0/Dataset004_H"),
    ]
    reproduced, _ = expected_files(work, runs, paper=True, methods=True)
    names = [str(p.relative_to(work)) for p in reproduced]
    assert names.count("preprocessed/Dataset004_H/nnUNetPlans.json") == 1
    assert "preprocessed/Dataset004_H/nnUNetResEncUNetMPlans.json" in names
    assert names.count("preprocessed/Dataset004_H/splits_final.json") == 1
    assert "results/resenc/seed_0/Dataset004_H/report/results_table.csv" in names
    assert "paper/methods_comparison.csv" in names and "paper/methods_comparison.tex" in names
    without, _ = expected_files(work, runs, paper=True)
    assert not any("methods_comparison" in str(p) for p in without)
