"""Experiment planner vs upstream nnU-Net v2.8.1 plans; configuration overrides; the plan command.

Every scenario folder under tests/data/plans holds upstream's inputs (dataset.json,
dataset_fingerprint.json) and outputs: nnUNetPlans.json and the ResEnc L / XL plans everywhere,
ResEncM, the ResEnc base planner, non-default GPU memory targets (4 GB default, 12 GB ResEncL)
and ``-overwrite_target_spacing`` on some (``PLANNER_OF``). The whole plans dict must equal
upstream's, key order and value types included. No key is excluded:
``image_reader_writer`` follows upstream's choice by file ending (NaturalImage2DIO for .png in
scenario e), although our own reading always goes through SimpleITK.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.cli import main
from nnunet_core.commands import plan as plan_command
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import resolve_configuration
from nnunet_core.planning.overrides import apply_overrides
from nnunet_core.planning.planner import get_preset, plan_experiment
from nnunet_core.planning.target_spacing import fullres_target_spacing, transpose_axes
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "plans"
SCENARIOS = sorted(p for p in DATA.iterdir() if (p / "dataset_fingerprint.json").is_file())
SCENARIOS += sorted(p for p in (DATA / "preprocessing_cases").iterdir() if p.is_dir())
# upstream's plans file -> our planner preset and plan_experiment arguments that make it
# (upstream's commands: tests/data/plans/README.md)
PLANNER_OF: dict[str, tuple[str, dict[str, Any]]] = {
    "nnUNetPlans.json": ("default", {}),
    "nnUNetResEncUNetPlans.json": ("ResEncUNetPlanner", {}),
    "nnUNetResEncUNetMPlans.json": ("ResEncM", {}),
    "nnUNetResEncUNetLPlans.json": ("nnUNetPlannerResEncL", {}),
    "nnUNetResEncUNetXLPlans.json": ("ResEncXL", {}),
    "nnUNetPlans_4GB.json": (
        "default",
        {"gpu_memory_target_gb": 4, "plans_name": "nnUNetPlans_4GB"},
    ),
    "nnUNetResEncUNetLPlans_12GB.json": (
        "ResEncL",
        {"gpu_memory_target_gb": 12, "plans_name": "nnUNetResEncUNetLPlans_12GB"},
    ),
}
# -overwrite_target_spacing differs per scenario (z y x before the transpose)
PLANNER_OF["nnUNetPlans_ots.json"] = ("default", {"plans_name": "nnUNetPlans_ots"})
TARGET_SPACING = {
    "b_Dataset902_AnisoMRI": [3.0, 0.8, 0.8],
    "i_Dataset909_TransposedAxis": [1.0, 1.0, 3.0],
}
CASES = [(s, f) for s in SCENARIOS for f in sorted(PLANNER_OF) if (s / f).is_file()]


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _plan(folder: Path, planner: str = "default", **kwargs: Any) -> dict[str, Any]:
    fingerprint, dataset_json = (
        _read(folder / "dataset_fingerprint.json"),
        _read(folder / "dataset.json"),
    )
    name = _read(folder / "nnUNetPlans.json")["dataset_name"]
    plans = plan_experiment(fingerprint, dataset_json, name, planner=planner, **kwargs)
    return json.loads(json.dumps(plans))  # as written to disk


def _differences(mine: Any, ref: Any, path: str = "") -> list[str]:
    """Value, type and key-order differences (dict equality alone ignores order and 1 vs 1.0)."""
    if isinstance(mine, dict) and isinstance(ref, dict):
        found = [] if list(mine) == list(ref) else [f"{path}: keys {list(mine)} != {list(ref)}"]
        for key in set(mine) & set(ref):
            found += _differences(mine[key], ref[key], f"{path}/{key}")
        return found
    if isinstance(mine, list) and isinstance(ref, list) and len(mine) == len(ref):
        return [
            d
            for i, (a, b) in enumerate(zip(mine, ref, strict=True))
            for d in _differences(a, b, f"{path}[{i}]")
        ]
    return [] if (mine == ref and type(mine) is type(ref)) else [f"{path}: {mine!r} != {ref!r}"]


def test_every_scenario_is_covered() -> None:
    names = {s.name for s in SCENARIOS}
    assert {
        "a_Dataset901_IsoCT",
        "e_Dataset905_Natural2D",
        "f_Dataset906_LargeCT",
        "synth3d_peer900",
    } <= names
    count = {f: sum(f == g for _, g in CASES) for f in PLANNER_OF}
    assert count == {
        "nnUNetPlans.json": 10,
        "nnUNetResEncUNetPlans.json": 2,
        "nnUNetResEncUNetMPlans.json": 3,
        "nnUNetResEncUNetLPlans.json": 10,
        "nnUNetResEncUNetXLPlans.json": 10,
        "nnUNetPlans_4GB.json": 2,
        "nnUNetResEncUNetLPlans_12GB.json": 2,
        "nnUNetPlans_ots.json": 2,
    }


@pytest.mark.parametrize(
    ("folder", "plans_file"), CASES, ids=[f"{s.name}-{f[:-5]}" for s, f in CASES]
)
def test_plans_equal_upstream(folder: Path, plans_file: str) -> None:
    planner, kwargs = PLANNER_OF[plans_file]
    if plans_file == "nnUNetPlans_ots.json":
        kwargs = {**kwargs, "overwrite_target_spacing": TARGET_SPACING[folder.name]}
    mine = _plan(folder, planner, **kwargs)
    assert _differences(mine, _read(folder / plans_file)) == []


def test_presets_differ_where_upstream_does() -> None:
    """The stored plans are not all alike: more GPU memory, more voxels per batch (scenario f)."""
    folder = DATA / "f_Dataset906_LargeCT"
    fullres = {
        f[: -len(".json")]: _read(folder / f)["configurations"]["3d_fullres"]
        for f in PLANNER_OF
        if (folder / f).is_file()
    }
    voxels = {f: math.prod(c["patch_size"]) * c["batch_size"] for f, c in fullres.items()}
    assert voxels["nnUNetPlans_4GB"] < voxels["nnUNetPlans"] == voxels["nnUNetResEncUNetMPlans"]
    assert voxels["nnUNetResEncUNetMPlans"] < voxels["nnUNetResEncUNetLPlans"]
    assert voxels["nnUNetResEncUNetLPlans"] < voxels["nnUNetResEncUNetXLPlans"]
    # the default planner names its data after its plans, the ResEnc planners reuse nnUNetPlans'
    assert fullres["nnUNetPlans_4GB"]["data_identifier"] == "nnUNetPlans_4GB_3d_fullres"
    assert fullres["nnUNetResEncUNetLPlans"]["data_identifier"] == "nnUNetPlans_3d_fullres"


def test_scenario_specific_outcomes() -> None:
    f = _plan(DATA / "f_Dataset906_LargeCT")
    assert list(f["configurations"]) == ["2d", "3d_lowres", "3d_fullres", "3d_cascade_fullres"]
    assert f["configurations"]["3d_lowres"]["next_stage"] == "3d_cascade_fullres"
    e = _plan(DATA / "e_Dataset905_Natural2D")
    assert list(e["configurations"]) == ["2d"]
    i = _plan(DATA / "i_Dataset909_TransposedAxis")
    assert (i["transpose_forward"], i["transpose_backward"]) == ([2, 0, 1], [1, 2, 0])


def test_anisotropic_axis_uses_tenth_percentile() -> None:
    spacings = [[5.0, 0.7, 0.7]] * 9 + [[3.6, 0.7, 0.7]]
    target = fullres_target_spacing(spacings, [[24, 320, 320]] * 10)
    assert target[0] == pytest.approx(4.86)  # p10 of [3.6, 5.0 x 9]: 3.6 + 0.9 * 1.4 (linear)
    mild = fullres_target_spacing(spacings, [[200, 320, 320]] * 10)  # many slices: rule off
    assert mild[0] == 5.0
    assert transpose_axes([0.9, 0.9, 3.8]) == ([2, 0, 1], [1, 2, 0])


def test_gpu_target_and_presets_change_the_plan() -> None:
    folder = DATA / "a_Dataset901_IsoCT"
    base = _plan(folder)["configurations"]["3d_fullres"]["patch_size"]
    bigger = _plan(folder, gpu_memory_target_gb=24)["configurations"]["3d_fullres"]["patch_size"]
    assert bigger != base and all(b >= a for a, b in zip(base, bigger, strict=True))
    assert get_preset("nnUNetPlannerResEncL").reference_gb == 24
    res_l = _plan(folder, "ResEncL")
    assert res_l["plans_name"] == "nnUNetResEncUNetLPlans"
    assert res_l["experiment_planner_used"] == "nnUNetPlannerResEncL"


def test_bad_planner_arguments_are_configuration_errors() -> None:
    folder = DATA / "a_Dataset901_IsoCT"
    with pytest.raises(ConfigurationError, match="unknown planner 'ResEncS'"):
        _plan(folder, "ResEncS")
    with pytest.raises(ConfigurationError, match=r"target spacing \[1.0, 1.0\]"):
        _plan(folder, overwrite_target_spacing=[1.0, 1.0])


def test_overwrite_target_spacing_replaces_the_automatic_one() -> None:
    plans = _plan(DATA / "a_Dataset901_IsoCT", overwrite_target_spacing=[2.0, 2.0, 2.0])
    assert plans["configurations"]["3d_fullres"]["spacing"] == [2.0, 2.0, 2.0]


# --- overrides -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plans_a() -> dict[str, Any]:
    return _read(DATA / "a_Dataset901_IsoCT" / "nnUNetPlans.json")


def test_override_with_partial_architecture_is_expanded(plans_a: dict[str, Any]) -> None:
    override = {
        "3d_fullres_demo": {
            "inherits_from": "3d_fullres",
            "batch_size": 4,
            "architecture": {"arch_kwargs": {"features_per_stage": [8, 16, 32, 64, 80, 80]}},
        }
    }
    result = apply_overrides(plans_a, override)
    assert "3d_fullres_demo" not in plans_a["configurations"]  # input untouched
    written = result["configurations"]["3d_fullres_demo"]
    assert written["inherits_from"] == "3d_fullres"
    parent_arch = plans_a["configurations"]["3d_fullres"]["architecture"]
    assert written["architecture"]["network_class_name"] == parent_arch["network_class_name"]
    assert (
        written["architecture"]["arch_kwargs"]["strides"] == parent_arch["arch_kwargs"]["strides"]
    )
    # a shallow-update resolver (ours and upstream's) now sees the intended configuration
    resolved = resolve_configuration(result, "3d_fullres_demo")
    assert resolved["batch_size"] == 4
    assert resolved["architecture"]["arch_kwargs"]["features_per_stage"] == [8, 16, 32, 64, 80, 80]
    assert resolved["architecture"]["arch_kwargs"]["n_stages"] == 6
    assert resolved["data_identifier"] == "nnUNetPlans_3d_fullres"
    assert "data_identifier" not in written


def test_overrides_can_chain_and_change_in_place(plans_a: dict[str, Any]) -> None:
    result = apply_overrides(
        plans_a,
        {
            "3d_bs4": {"inherits_from": "3d_fullres", "batch_size": 4},
            "3d_bs4_long": {"inherits_from": "3d_bs4", "patch_size": [128, 160, 128]},
            "2d": {"batch_size": 7},
        },
    )
    resolved = resolve_configuration(result, "3d_bs4_long")
    assert (resolved["batch_size"], resolved["patch_size"]) == (4, [128, 160, 128])
    assert result["configurations"]["2d"]["batch_size"] == 7
    assert (
        result["configurations"]["2d"]["architecture"]
        == plans_a["configurations"]["2d"]["architecture"]
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"x": {"inherits_from": "3d_lowres"}}, "parent configuration '3d_lowres' not in plans"),
        ({"x": {"batch_size": 2}}, "needs 'inherits_from'"),
        ({"2d": {"inherits_from": "3d_fullres"}}, "already exists"),
        ({"bad name": {"inherits_from": "2d"}}, "override name 'bad name'"),
        (
            {
                "x": {
                    "inherits_from": "3d_fullres",
                    "architecture": {"arch_kwargs": {"features_per_stage": [8, 16]}},
                }
            },
            "features_per_stage has 2 entries but n_stages is 6",
        ),
        (
            {"x": {"inherits_from": "3d_fullres", "patch_size": [112, 160, 120]}},
            r"axis 2 \(120\) is not divisible .* \(32\)",
        ),
        ({"x": {"inherits_from": "3d_fullres", "spacing": [2.0, 2.0, 2.0]}}, "changes spacing"),
    ],
)
def test_invalid_overrides_are_rejected(
    plans_a: dict[str, Any], override: dict, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        apply_overrides(plans_a, override)


def test_new_data_identifier_allows_preprocessing_changes(plans_a: dict[str, Any]) -> None:
    override = {
        "x": {
            "inherits_from": "3d_fullres",
            "spacing": [2.0, 2.0, 2.0],
            "data_identifier": "custom_x",
        }
    }
    resolved = resolve_configuration(apply_overrides(plans_a, override), "x")
    assert (resolved["spacing"], resolved["data_identifier"]) == ([2.0, 2.0, 2.0], "custom_x")


# --- the plan command ----------------------------------------------------------------------------


def _plan_args(tmp_path: Path, **extra: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    plan_command.configure_parser(parser)
    argv = [
        "-d",
        "Dataset901_IsoCT",
        "--raw",
        str(tmp_path / "raw"),
        "--preprocessed",
        str(tmp_path / "pre"),
    ]
    for flag, value in extra.items():
        argv += [f"--{flag.replace('_', '-')}", *([value] if isinstance(value, str) else value)]
    return parser.parse_args(argv)


def _dataset_dirs(tmp_path: Path) -> Path:
    source = DATA / "a_Dataset901_IsoCT"
    raw = tmp_path / "raw" / "Dataset901_IsoCT"
    pre = tmp_path / "pre" / "Dataset901_IsoCT"
    raw.mkdir(parents=True)
    pre.mkdir(parents=True)
    (raw / "dataset.json").write_bytes((source / "dataset.json").read_bytes())
    (pre / "dataset_fingerprint.json").write_bytes(
        (source / "dataset_fingerprint.json").read_bytes()
    )
    return pre


def test_plan_command_writes_plans_and_dataset_json(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pre = _dataset_dirs(tmp_path)
    overrides = json.dumps({"3d_bs3": {"inherits_from": "3d_fullres", "batch_size": 3}})
    assert plan_command.run(_plan_args(tmp_path, overrides=overrides)) == 0
    written = _read(pre / "nnUNetPlans.json")
    expected = _read(DATA / "a_Dataset901_IsoCT" / "nnUNetPlans.json")
    assert written["configurations"]["3d_bs3"] == {"inherits_from": "3d_fullres", "batch_size": 3}
    del written["configurations"]["3d_bs3"]
    assert written == expected
    assert (pre / "dataset.json").read_bytes() == (
        DATA / "a_Dataset901_IsoCT" / "dataset.json"
    ).read_bytes()
    out = capsys.readouterr().out
    assert (
        "3d_fullres: spacing (1.098, 0.9002, 0.9002), patch [112, 160, 128], batch 2, 6 stages"
        in out
    )
    assert "3d_bs3:" in out and "batch 3" in out


def test_plan_command_planner_name_and_override_file(tmp_path: Path) -> None:
    pre = _dataset_dirs(tmp_path)
    file = tmp_path / "overrides.json"
    file.write_text(json.dumps({"2d_bs8": {"inherits_from": "2d", "batch_size": 8}}))
    args = _plan_args(tmp_path, planner="ResEncM", overrides=str(file), plans_name="MyPlans")
    assert plan_command.run(args) == 0
    written = _read(pre / "MyPlans.json")
    assert written["plans_name"] == "MyPlans"
    assert written["experiment_planner_used"] == "nnUNetPlannerResEncM"
    assert "2d_bs8" in written["configurations"]


def test_plan_command_needs_a_fingerprint(tmp_path: Path) -> None:
    pre = _dataset_dirs(tmp_path)
    (pre / "dataset_fingerprint.json").unlink()
    with pytest.raises(ConfigurationError, match="run `nnunet-core fingerprint"):
        plan_command.run(_plan_args(tmp_path))
    _dataset_dirs(tmp_path / "again")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        plan_command.run(_plan_args(tmp_path / "again", overrides="{broken"))


CLI_CASES = [
    ("-pl", "ExperimentPlanner", "nnUNetPlans.json", []),
    ("-pl", "default", "nnUNetPlans.json", []),
    ("-pl", "ResEncUNetPlanner", "nnUNetResEncUNetPlans.json", []),
    ("-pl", "ResEnc", "nnUNetResEncUNetPlans.json", []),
    ("-pl", "nnUNetPlannerResEncM", "nnUNetResEncUNetMPlans.json", []),
    ("-pl", "ResEncM", "nnUNetResEncUNetMPlans.json", []),
    ("-pl", "nnUNetPlannerResEncL", "nnUNetResEncUNetLPlans.json", []),
    ("--planner", "ResEncL", "nnUNetResEncUNetLPlans.json", []),
    ("-pl", "nnUNetPlannerResEncXL", "nnUNetResEncUNetXLPlans.json", []),
    ("-pl", "ResEncXL", "nnUNetResEncUNetXLPlans.json", []),
    (
        "-pl",
        "default",
        "nnUNetPlans_4GB.json",
        ["-gpu_memory_target", "4", "-overwrite_plans_name", "nnUNetPlans_4GB"],
    ),
    (
        "-pl",
        "nnUNetPlannerResEncL",
        "nnUNetResEncUNetLPlans_12GB.json",
        ["--gpu-memory-target", "12", "--plans-name", "nnUNetResEncUNetLPlans_12GB"],
    ),
]


@pytest.mark.parametrize(
    ("flag", "planner", "plans_file", "extra"), CLI_CASES, ids=[c[1] + c[2][:-5] for c in CLI_CASES]
)
def test_every_planner_name_is_reachable_from_the_cli(
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    flag: str,
    planner: str,
    plans_file: str,
    extra: list[str],
) -> None:
    """`nnunet-core plan-experiment` with upstream's -pl names writes upstream's plans file."""
    pre = _dataset_dirs(tmp_path)
    roots = ["--raw", str(tmp_path / "raw"), "--preprocessed", str(tmp_path / "pre")]
    assert main(["plan-experiment", "-d", "901", flag, planner, *extra, *roots]) == 0
    capsys.readouterr()
    written = _read(pre / plans_file)
    assert _differences(written, _read(DATA / "a_Dataset901_IsoCT" / plans_file)) == []
