"""A planner of one's own: a ``Planner`` subclass in a user's file, named by ``-pl`` as a trainer
is named by ``-tr``; its plans name it and record its source's sha256; a bad name is one line.

Upstream's planners stay number for number upstream's: tests/parity/test_planner_parity.py.
The workflow's side (the config check, methods): tests/unit/workflow/test_workflow_planners.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nnunet_core import Planner, cli
from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.planner import plan_experiment
from nnunet_core.planning.presets import ExperimentPlanner, nnUNetPlannerResEncM
from nnunet_core.planning.user_planner import EXT_PLANNER_ENV, resolve_planner
from tests.helpers.paths import REPO, TEST_DATA
from tests.helpers.training import DATASET
from tests.helpers.user_planners import PATCH_EDGE, PLANNER_CLASS, PLANS_NAME, write_planner

SCENARIO = TEST_DATA / "plans" / "f_Dataset906_LargeCT"  # plans 2d, 3d_lowres, cascade, fullres


def _scenario_plan(planner: Any, **kwargs: Any) -> dict[str, Any]:
    fingerprint = json.loads((SCENARIO / "dataset_fingerprint.json").read_text())
    dataset_json = json.loads((SCENARIO / "dataset.json").read_text())
    name = "Dataset906_LargeCT"
    return plan_experiment(fingerprint, dataset_json, name, planner=planner, **kwargs)


def plan_tiny_dataset(template: Path, tmp_path: Path, planner: str) -> Path:
    """``nnunet-core plan -pl planner`` (in-process) on a copy of the tiny dataset's fingerprint;
    returns the preprocessed root."""
    pre = tmp_path / "pre"
    shutil.copytree(template / "preprocessed" / DATASET, pre / DATASET,
                    ignore=shutil.ignore_patterns("nnUNetPlans_*"))  # fmt: skip
    roots = ["--raw", str(template / "raw"), "--preprocessed", str(pre)]
    assert cli.main(["plan", "-d", DATASET, *roots, "-pl", planner]) == 0
    return pre


def test_a_planner_file_plans_through_the_plan_command(
    tiny_training_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``plan -pl /outside/file.py:Class`` on the tiny dataset: its patch, its plans name, and a
    record of the planner (name, class, file, sha256)."""
    name = write_planner(tmp_path / "my_planners")
    pre = plan_tiny_dataset(tiny_training_template, tmp_path, name)
    assert f"{PLANS_NAME} ({PLANNER_CLASS})" in capsys.readouterr().out
    plans = json.loads((pre / DATASET / f"{PLANS_NAME}.json").read_text())
    assert plans["plans_name"] == PLANS_NAME
    assert plans["experiment_planner_used"] == PLANNER_CLASS
    fullres = plans["configurations"]["3d_fullres"]
    assert fullres["patch_size"] == [PATCH_EDGE] * 3
    assert fullres["data_identifier"] == f"{PLANS_NAME}_3d_fullres"  # its own data
    source = tmp_path / "my_planners" / "big_patch_planner.py"
    assert plans["planner_source"] == {
        "name": name,
        "class": PLANNER_CLASS,
        "found_by": "file",
        "file": str(source),
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
    }
    keys = list(plans)
    assert keys.index("planner_source") == keys.index("experiment_planner_used") + 1
    default = json.loads((pre / DATASET / "nnUNetPlans.json").read_text())
    assert default["configurations"]["3d_fullres"]["patch_size"] != [PATCH_EDGE] * 3
    assert "planner_source" not in default


def test_the_isotropic_planner_example_plans_isotropic_voxels(
    tiny_training_template: Path, tmp_path: Path
) -> None:
    """examples/isotropic_planner, copied outside the repository as a user has it."""
    file = tmp_path / "isotropic_planner.py"
    shutil.copy(REPO / "examples" / "isotropic_planner" / file.name, file)
    pre = plan_tiny_dataset(tiny_training_template, tmp_path, f"{file}:IsotropicPlanner")
    plans = json.loads((pre / DATASET / "IsotropicPlans.json").read_text())
    default = json.loads((pre / DATASET / "nnUNetPlans.json").read_text())
    spacing = plans["configurations"]["3d_fullres"]["spacing"]
    assert len(set(spacing)) == 1 and spacing[0] == min(
        default["configurations"]["3d_fullres"]["spacing"]
    )
    assert max(default["configurations"]["3d_fullres"]["spacing"]) > spacing[0]  # anisotropic data


@pytest.mark.parametrize(
    ("planner", "message", "exit_code"),
    [
        ("{folder}/absent.py:BigPatchPlanner", "planner '{folder}/absent.py:BigPatchPlanner': "
         "{folder}/absent.py: file not found", 2),
        ("{file}:NotAPlanner", "NotAPlanner is no nnunet_core.Planner", 2),
        ("ResEncS", "unknown planner 'ResEncS'; choose one of default (ExperimentPlanner)", 2),
        ("no_such_package_anywhere.mod:Mine", "no module 'no_such_package_anywhere'", 2),
        # the file is there but its code is wrong: exit 3 (never retried), as for a trainer
        ("{file}:Missing", "big_patch_planner.py:1: defines no class Missing (its classes: "
         "BigPatchPlanner at line 5, NotAPlanner at line 12)", 3),
    ],
)  # fmt: skip
def test_a_bad_planner_is_one_line_before_any_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planner: str, message: str, exit_code: int
) -> None:
    file = write_planner(tmp_path).rsplit(":", 1)[0]
    planner, message = (t.format(folder=tmp_path, file=file) for t in (planner, message))
    # no such dataset or roots: the planner is refused first
    code = cli.main(["plan", "-d", "999", "--preprocessed", str(tmp_path / "none"), "-pl", planner])
    err = capsys.readouterr().err
    assert code == exit_code and err.count("\n") == 1, err
    assert err.startswith("nnunet-core plan: error: ") and message in err, err


def test_a_bare_class_name_is_found_under_nnunet_ext_planner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_planner(tmp_path / "ext")
    monkeypatch.setenv(EXT_PLANNER_ENV, str(tmp_path / "ext"))
    assert resolve_planner(PLANNER_CLASS).__name__ == PLANNER_CLASS
    with pytest.raises(ConfigurationError, match=f"no file defines class Other .{EXT_PLANNER_ENV}"):
        resolve_planner("Other")


class _FullresOnly(nnUNetPlannerResEncM):
    """A ResEncM subclass that keeps 3d_fullres alone, with a plans name of its own."""

    plans_name: ClassVar[str | None] = "FullresOnlyPlans"

    def select_configurations(self, planned: dict[str, Any]) -> dict[str, Any]:
        return {"3d_fullres": planned["3d_fullres"]}


def test_hooks_choose_the_configurations_and_a_subclass_has_its_own_data() -> None:
    plans = _scenario_plan(_FullresOnly)
    assert list(plans["configurations"]) == ["3d_fullres"]
    assert plans["plans_name"] == "FullresOnlyPlans"
    # ResEncM itself preprocesses as the default planner; a subclass may change the spacing
    assert plans["configurations"]["3d_fullres"]["data_identifier"] == "FullresOnlyPlans_3d_fullres"
    upstream = _scenario_plan("ResEncM")["configurations"]["3d_fullres"]
    assert upstream["data_identifier"] == "nnUNetPlans_3d_fullres"
    assert plans["configurations"]["3d_fullres"]["patch_size"] == upstream["patch_size"]


def test_the_plans_name_defaults_to_the_class_and_never_to_the_parents() -> None:
    class WideSpacingPlanner(ExperimentPlanner):
        def target_spacing(self, spacings: Any, shapes: Any) -> Any:
            return super().target_spacing(spacings, shapes) * 2

    assert WideSpacingPlanner.default_plans_name() == "WideSpacingPlans"
    assert ExperimentPlanner.default_plans_name() == "nnUNetPlans"
    assert type("Coarse", (Planner,), {}).default_plans_name() == "CoarsePlans"
    plans = _scenario_plan(WideSpacingPlanner)
    default = _scenario_plan("default")
    assert plans["experiment_planner_used"] == "WideSpacingPlanner"
    wide, base = (p["configurations"]["3d_fullres"]["spacing"] for p in (plans, default))
    assert wide == [2 * s for s in base]


def test_a_planner_that_keeps_no_configuration_or_a_cascade_alone_is_refused() -> None:
    class Nothing(Planner):
        def select_configurations(self, planned: dict[str, Any]) -> dict[str, Any]:  # noqa: ARG002
            return {}

    class CascadeAlone(Planner):
        def select_configurations(self, planned: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in planned.items() if k != "3d_lowres"}

    with pytest.raises(ConfigurationError, match="planner Nothing: select_configurations kept no"):
        _scenario_plan(Nothing)
    with pytest.raises(ConfigurationError, match="3d_cascade_fullres needs 3d_lowres"):
        _scenario_plan(CascadeAlone)
