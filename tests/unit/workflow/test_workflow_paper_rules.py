"""How paper.smk joins its runs' modules (nnunet_core.workflow.paper_rules): profile settings
under every run's rule names, and which run's rule makes the files two runs share."""

from __future__ import annotations

from types import SimpleNamespace

from snakemake.cli import parse_set_resources, parse_set_threads
from snakemake.settings.types import ResourceSettings

from nnunet_core.workflow import paper_rules

SEED0, SEED1, OTHER = "D4_seed0", "D4_seed1", "D5_seed0"


def test_profile_settings_follow_the_runs_rule_names() -> None:
    settings = {"train": {"slurm_partition": "gpu"}, "plan": {"mem_mb": 100}}
    assert paper_rules.prefixed_settings(settings, f"{SEED1}_") == {
        f"{SEED1}_train": {"slurm_partition": "gpu"},
        f"{SEED1}_plan": {"mem_mb": 100},
    }


def test_the_profile_settings_reach_snakemake_under_every_runs_rule_names() -> None:
    """Through the public fields Snakemake makes each rule's resources from; a run's rule named
    by its full name keeps its own setting."""
    given = ResourceSettings(
        cores=4,
        overwrite_resources=parse_set_resources(
            ["train:slurm_partition=gpu", f"{SEED1}_train:mem_mb=7"]
        ),
        overwrite_threads=parse_set_threads(["train=3"]),
    )
    workflow = SimpleNamespace(resource_settings=given)
    paper_rules.copy_profile_settings_to_runs(workflow, [f"{SEED0}_", f"{SEED1}_"])
    settings = workflow.resource_settings
    assert settings.cores == 4
    assert {"train", f"{SEED0}_train", f"{SEED1}_train"} <= set(settings.overwrite_resources)
    assert settings.overwrite_resources[f"{SEED0}_train"] is given.overwrite_resources["train"]
    assert (
        settings.overwrite_resources[f"{SEED1}_train"]
        is given.overwrite_resources[f"{SEED1}_train"]
    )
    threads = settings.overwrite_threads
    assert [threads[name].value for name in ("train", f"{SEED0}_train", f"{SEED1}_train")] == [
        3
    ] * 3


def test_a_runs_rules_are_those_its_module_added() -> None:
    before = ["all", f"{SEED0}_train"]
    after = [*before, f"{SEED1}_train", f"{SEED1}_plan"]
    assert paper_rules.rules_added(before, after, f"{SEED1}_") == {"train", "plan"}


def test_the_later_seed_gives_way_only_where_both_make_the_same_files() -> None:
    outputs = {
        f"{SEED0}_plan": ["pre/D4/plans.json"],
        f"{SEED1}_plan": ["pre/D4/plans.json"],  # the seeds share the dataset's plans
        f"{SEED0}_train": ["seed_0/fold_0/checkpoint_final.pth"],
        f"{SEED1}_train": ["seed_1/fold_0/checkpoint_final.pth"],
        f"{OTHER}_plan": ["pre/D5/plans.json"],
        f"{SEED0}_report": [],
        f"{SEED1}_report": [],  # no outputs: nothing to order
    }
    rules = {
        SEED0: {"plan", "train", "report"},
        SEED1: {"plan", "train", "report"},
        OTHER: {"plan"},
    }
    order = paper_rules.shared_rule_order([SEED0, SEED1, OTHER], rules, outputs.__getitem__)
    assert order == [(f"{SEED0}_plan", f"{SEED1}_plan")]


def test_three_seeds_each_give_way_to_every_earlier_one() -> None:
    runs = ["D_seed0", "D_seed1", "D_seed2"]
    order = paper_rules.shared_rule_order(
        runs, {run: {"plan"} for run in runs}, lambda _rule: ["pre/D/plans.json"]
    )
    assert order == [
        ("D_seed0_plan", "D_seed1_plan"),
        ("D_seed0_plan", "D_seed2_plan"),
        ("D_seed1_plan", "D_seed2_plan"),
    ]
