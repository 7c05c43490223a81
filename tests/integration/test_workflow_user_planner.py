"""A user's planner through the real workflow, as dry runs (a second each, no job runs): named by
``planning.planner``, its plan job runs it and writes its plans; in paper mode a method with
another planner gets plans of its own beside it; a planner file that is not there stops the
workflow at parse time in one line, exit 2; a preset method sharing the default planner's data
(ResEncM) leaves making it to the baseline's rule. (Planning itself through ``nnunet-core plan``:
tests/unit/planning/test_user_planner.py; a real run of a method with it, preprocessing,
training and predicting: the third method of test_workflow_methods.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

from nnunet_core.planning.planner import plan_experiment
from tests.helpers.user_planners import PLANS_NAME, write_planner
from tests.helpers.workflow import (
    copy_prepared,
    job_counts,
    prepared_config,
    snakemake,
    tiny_config,
)

DATASET = "Dataset900_Synth"
PLAN_INPUTS = ("dataset_fingerprint.json", "dataset.json")


def plan_commands(output: str) -> list[str]:
    return re.findall(r"^Shell command: (nnunet-core plan .*)$", output, re.M)


def test_the_plan_job_runs_the_users_planner_into_its_own_plans(tmp_path: Path) -> None:
    name = write_planner(tmp_path / "my_planners")
    config = tiny_config(tmp_path / "work")
    config["planning"]["planner"] = name
    result = snakemake(tmp_path, config, "-n", "-p")
    output = result.stdout + result.stderr
    (command,) = plan_commands(output)
    assert f"-pl {name} --plans-name {PLANS_NAME} " in command, command
    plans = tmp_path / "work" / "preprocessed" / DATASET / f"{PLANS_NAME}.json"
    assert f"output: {plans}" in output


def test_methods_compare_the_users_planner_with_upstreams(tmp_path: Path) -> None:
    """The baseline plans with the dataset's planner (the user's), the other method with
    upstream's default: two plan jobs, two plans files."""
    name = write_planner(tmp_path / "my_planners")
    config = tiny_config(tmp_path / "work")
    config["planning"]["planner"] = name
    config["methods"] = [
        {"name": "big", "trainer": "nnUNetTrainer", "baseline": True},
        {"name": "plain", "trainer": "nnUNetTrainer", "planner": "default"},
    ]
    result = snakemake(tmp_path, config, "-n", "-p")
    output = result.stdout + result.stderr
    counts = job_counts(output)
    assert counts[f"{DATASET}_seed0_big_plan"] == counts[f"{DATASET}_seed0_plain_plan"] == 1
    commands = sorted(plan_commands(output))
    assert len(commands) == 2, commands
    assert any(f"-pl {name} --plans-name {PLANS_NAME} " in c for c in commands), commands
    assert any("-pl default --plans-name nnUNetPlans " in c for c in commands), commands


def test_a_missing_planner_file_stops_the_workflow_before_any_job(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["planning"]["planner"] = f"{tmp_path}/absent.py:BigPatchPlanner"
    result = snakemake(tmp_path, config, "-n", check=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stdout + result.stderr
    assert any(
        line.startswith(f"config planning.planner: planner '{tmp_path}/absent.py:BigPatchPlanner'")
        and line.endswith("absent.py: file not found")
        for line in lines
    ), lines
    assert not (tmp_path / "work").exists()


def test_a_preset_sharing_the_default_planners_data_leaves_it_to_the_baseline(
    prepared_work: Path, tmp_path: Path
) -> None:
    """ResEncM preprocesses 2d and 3d_fullres as the default planner (upstream's data
    identifiers): both methods' preprocess rules can make nnUNetPlans_3d_fullres, and the
    baseline's does (the rules are ordered though their wildcard constraints differ)."""
    work = copy_prepared(prepared_work, tmp_path / "work")
    config = prepared_config(work)
    pre = work / "preprocessed" / DATASET  # ResEncM's plans, as its checkpoint writes them
    fingerprint, dataset_json = (json.loads((pre / f).read_text()) for f in PLAN_INPUTS)
    plans = plan_experiment(fingerprint, dataset_json, DATASET, planner="ResEncM")
    (pre / "nnUNetResEncUNetMPlans.json").write_text(json.dumps(plans))
    config["methods"] = [
        {"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True},
        {"name": "resenc", "trainer": "nnUNetTrainer", "planner": "ResEncM"},
    ]
    result = snakemake(tmp_path, config, "-n", "preprocessed")
    output = result.stdout + result.stderr
    assert "Nothing to be done" in output, output
