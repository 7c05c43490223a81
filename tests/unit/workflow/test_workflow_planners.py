"""A user's planner in the workflow's config (``planning.planner``, a method's ``planner``): its
plans name names the run's files, a bad one is refused in one line naming the key before any
job, and two planners writing one plans file are refused. Pure functions of the config; the
dry runs through Snakemake: tests/integration/test_workflow_user_planner.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError, UserCodeError
from nnunet_core.workflow.config import schema_errors
from nnunet_core.workflow.runs import check_run_keys, run_instances
from tests.helpers.user_planners import PLANS_NAME, write_planner
from tests.helpers.workflow import SCHEMA

BASELINE = {"name": "nnunet", "trainer": "nnUNetTrainer", "baseline": True}


def config_with(planner: str, *, plans_name: str | None = None) -> dict:
    return {
        "work_dir": "w",
        "dataset": {"id": 901, "name": "Liver", "raw_root": "/data/raw"},
        "seed": 0,
        "planning": {"planner": "default", "plans_name": plans_name},
        "training": {"trainer": "nnUNetTrainer"},
        "methods": [BASELINE, {"name": "big", "trainer": "nnUNetTrainer", "planner": planner}],
    }


def test_a_method_with_a_users_planner_gets_its_own_plans(tmp_path: Path) -> None:
    config = config_with(write_planner(tmp_path))
    assert schema_errors(config, SCHEMA) == []
    check_run_keys(config)
    baseline, big = run_instances(config)
    assert (baseline.plans_name(), big.plans_name()) == ("nnUNetPlans", PLANS_NAME)
    # the baseline's plan job declares the dataset's dataset.json, the other writes it too
    assert big.config["method"]["writes_dataset_json"] is False
    # the same planner as the baseline's (by another of its names): one plans file, shared
    same = config_with("ExperimentPlanner")
    assert [r.plans_name() for r in run_instances(same)] == ["nnUNetPlans"] * 2


@pytest.mark.parametrize(
    ("where", "planner", "message"),
    [
        ("methods", "{folder}/absent.py:Big", "config methods[1].planner: planner "
         "'{folder}/absent.py:Big': {folder}/absent.py: file not found"),
        ("methods", "{file}:NotAPlanner", "config methods[1].planner: planner '{file}:NotAPlanner':"
         " {file}:12: NotAPlanner is no nnunet_core.Planner"),
        ("planning", "ResEncS", "config planning.planner: unknown planner 'ResEncS'"),
    ],
)  # fmt: skip
def test_a_bad_planner_is_one_line_naming_its_key(
    tmp_path: Path, where: str, planner: str, message: str
) -> None:
    file = write_planner(tmp_path).rsplit(":", 1)[0]
    planner, message = (t.format(folder=tmp_path, file=file) for t in (planner, message))
    config = config_with("default")
    if where == "methods":
        config["methods"][1]["planner"] = planner
    else:
        config["planning"]["planner"] = planner
    with pytest.raises(ConfigurationError) as caught:
        check_run_keys(config)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert not isinstance(caught.value, UserCodeError)  # exit 2


def test_two_planners_writing_one_plans_file_are_refused(tmp_path: Path) -> None:
    config = config_with(write_planner(tmp_path), plans_name="SharedPlans")
    with pytest.raises(ConfigurationError, match=(
        r"^config methods: nnunet and big plan Dataset901_Liver with different planners "
        r"\(ExperimentPlanner, BigPatchPlanner\) into the same plans SharedPlans"
    )):  # fmt: skip
        run_instances(config)


def test_each_runs_preprocess_rule_makes_only_its_own_planners_data(tmp_path: Path) -> None:
    """The runs of a dataset share the preprocess rule's output pattern; a method's own data
    (its planner's folders) must not be claimed by the baseline's rule, whose plans lack it."""
    from nnunet_core.workflow.planner_checks import data_identifier_pattern

    overrides = {"3d_small": {"inherits_from": "3d_fullres", "data_identifier": "small_data"}}
    default = data_identifier_pattern({"planner": "default", "overrides": overrides}, "nnUNetPlans")
    assert default == ("nnUNetPlans_2d|nnUNetPlans_3d_fullres|nnUNetPlans_3d_lowres|small_data")
    # ResEncM preprocesses 2d and 3d_fullres as the default planner, as upstream's
    resenc = data_identifier_pattern({"planner": "ResEncM"}, "nnUNetResEncUNetMPlans")
    assert resenc.split("|")[:2] == ["nnUNetPlans_2d", "nnUNetPlans_3d_fullres"]
    mine = data_identifier_pattern({"planner": write_planner(tmp_path)}, PLANS_NAME)
    assert mine.split("|")[0] == f"{PLANS_NAME}_2d" and "nnUNetPlans" not in mine
