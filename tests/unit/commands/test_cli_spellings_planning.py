"""Upstream's spellings of the planning commands, and ``plan-and-preprocess``.

An nnU-Net user types ``-gpu_memory_target``, ``-plans_name``, ``--no_pbar`` or ``-np 4 8``;
each must reach the same setting as our spelling (argparse alone would read ``-plans_name`` as
``-p lans_name``). The end-to-end tests run the real commands on tiny synthetic datasets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.cli import build_parser, main
from nnunet_core.commands.common import processes_per_configuration
from nnunet_core.errors import ConfigurationError

TINY = {"num_training": 4, "num_test": 0, "shape": (10, 20, 20)}


def _parse(*argv: str) -> dict[str, Any]:
    args = build_parser(argv[0]).parse_args(list(argv))
    return vars(args)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["plan", "-d", "4", "-gpu_memory_target", "12"], {"gpu_memory_target": 12.0}),
        (["plan", "-d", "4", "--gpu-memory-target", "4"], {"gpu_memory_target": 4.0}),
        (["plan", "-d", "4", "-overwrite_plans_name", "P"], {"plans_name": "P"}),
        (
            ["plan", "-d", "4", "-overwrite_target_spacing", "1", "2", "3"],
            {"overwrite_target_spacing": [1.0, 2.0, 3.0]},
        ),
        (["plan", "-d", "4", "-preprocessor_name", "X"], {"preprocessor_name": "X"}),
        (["plan", "-d", "4", "5", "-pl", "nnUNetPlannerResEncL"], {"dataset": ["4", "5"]}),
        (["plan-experiment", "-d", "4", "-pl", "ResEncXL"], {"planner": "ResEncXL"}),
        (["preprocess", "-d", "4", "-plans_name", "P"], {"plans_name": "P"}),
        (["preprocess", "-d", "4", "-p", "P", "--no_pbar"], {"plans_name": "P", "no_pbar": True}),
        (
            ["preprocess", "-d", "4", "-c", "2d", "3d_fullres", "-np", "4", "8"],
            {"num_processes": [4, 8]},
        ),
        (["preprocess", "-d", "4", "--verbose"], {"verbose": True, "num_processes": None}),
        (["fingerprint", "-d", "4", "-np", "3"], {"fingerprint_processes": 3}),
        (["extract-fingerprint", "-d", "4", "-npfp", "3"], {"fingerprint_processes": 3}),
        (
            ["fingerprint", "-d", "4", "--verify_dataset_integrity", "--clean"],
            {"verify_dataset_integrity": True, "clean": True},
        ),
        (
            [
                "plan-and-preprocess",
                "-d",
                "4",
                "-npfp",
                "2",
                "-np",
                "1",
                "3",
                "-c",
                "2d",
                "3d_fullres",
            ],
            {"fingerprint_processes": 2, "num_processes": [1, 3]},
        ),
        (
            ["plan-and-preprocess", "-d", "4", "--no_pp", "-gpu_memory_target", "6"],
            {"no_pp": True, "gpu_memory_target": 6.0},
        ),
        (
            ["plan-and-preprocess", "-d", "4", "-overwrite_plans_name", "P", "-pl", "ResEncM"],
            {"plans_name": "P", "planner": "ResEncM"},
        ),
    ],
)
def test_upstream_spelling_reaches_our_setting(argv: list[str], expected: dict[str, Any]) -> None:
    parsed = _parse(*argv)
    assert {key: parsed[key] for key in expected} == expected


def test_np_pairs_with_configurations_as_upstream() -> None:
    assert processes_per_configuration([3], ["2d", "3d_fullres", "3d_lowres"]) == [3, 3, 3]
    assert processes_per_configuration([4, 8], ["2d", "3d_fullres"]) == [4, 8]
    with pytest.raises(ConfigurationError, match=r"-np has 2 values \[4, 8\] for 3 configurations"):
        processes_per_configuration([4, 8], ["2d", "3d_fullres", "3d_lowres"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["preprocess", "-d", "4", "-plans_nam", "P"],
            "unknown option -plans_nam (did you mean -plans_name?)",
        ),
        (["plan", "-d", "4", "-plans_name", "P"], "unknown option -plans_name"),
        (["plan", "-d", "4", "-gpu_memory", "8"], "unknown option -gpu_memory"),
        (["preprocess", "-d", "4", "-np", "0"], "expected an integer >= 1, got '0'"),
    ],
)
def test_misspelled_flags_fail_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown single-dash flag is refused, never read as a short flag plus a value."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err, err


# --- real runs -----------------------------------------------------------------------------------


@pytest.fixture
def roots(tmp_path: Path, make_raw_dataset) -> Path:
    make_raw_dataset(tmp_path / "raw" / "Dataset900_Synth", **TINY)
    make_raw_dataset(tmp_path / "raw" / "Dataset901_Second", seed=3, **TINY)
    (tmp_path / "pre").mkdir()
    return tmp_path


def _run(roots: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    flags = ["--raw", str(roots / "raw"), "--preprocessed", str(roots / "pre")]
    code = main([*argv, *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_plan_and_preprocess_with_upstreams_flags(roots: Path, capsys) -> None:
    """Several datasets, upstream's default -c (3d_lowres is not planned: skipped), -np per
    configuration, a preset by upstream's class name, a GPU target and a plans name."""
    code, out, _ = _run(
        roots,
        capsys,
        "plan-and-preprocess",
        "-d", "900", "901",
        "-c", "2d", "3d_fullres", "3d_lowres",
        "-np", "1", "2", "1",
        "-npfp", "1",
        "--verify_dataset_integrity",
        "-pl", "nnUNetPlannerResEncL",
        "-gpu_memory_target", "12",
        "-overwrite_plans_name", "LPlans12",
        "--clean", "--no_pbar", "--verbose",
    )  # fmt: skip
    assert code == 0
    for name in ("Dataset900_Synth", "Dataset901_Second"):
        folder = roots / "pre" / name
        assert f"INFO: configuration 3d_lowres is not in LPlans12.json of {name}; skipped" in out
        plans = _read(folder / "LPlans12.json")
        assert (plans["plans_name"], plans["experiment_planner_used"]) == (
            "LPlans12",
            "nnUNetPlannerResEncL",
        )
        assert (folder / "verify.json").is_file()
        # one -np value per configuration: each data folder ran with its own
        processes = {
            c: _read(folder / f"nnUNetPlans_{c}" / "preprocess_summary.json")["num_processes"]
            for c in ("2d", "3d_fullres")
        }
        assert processes == {"2d": 1, "3d_fullres": 2}
        assert len(list((folder / "gt_segmentations").iterdir())) == TINY["num_training"]
    # upstream's order: every fingerprint, then every plan, then preprocessing
    steps = ["Fingerprint extraction...", "Experiment planning...", "Preprocessing..."]
    assert [out.index(s) for s in steps] == sorted(out.index(s) for s in steps)


def test_no_pp_stops_after_planning_and_aliases_match(roots: Path, capsys) -> None:
    code, _, _ = _run(roots, capsys, "plan-and-preprocess", "-d", "900", "--no_pp", "-npfp", "1")
    folder = roots / "pre" / "Dataset900_Synth"
    assert code == 0
    assert not (folder / "nnUNetPlans_3d_fullres").exists()
    first = {f: (folder / f).read_bytes() for f in ("dataset_fingerprint.json", "nnUNetPlans.json")}
    assert _run(roots, capsys, "extract-fingerprint", "-d", "900", "-np", "1")[0] == 0
    assert _run(roots, capsys, "plan-experiment", "-d", "Dataset900_Synth")[0] == 0
    again = {f: (folder / f).read_bytes() for f in first}
    assert again == first
    data = _read(folder / "nnUNetPlans.json")["configurations"]["3d_fullres"]["data_identifier"]
    assert data == "nnUNetPlans_3d_fullres"


def test_preprocess_skips_unplanned_and_takes_plans_name(roots: Path, capsys) -> None:
    assert _run(roots, capsys, "fingerprint", "-d", "900", "-np", "1")[0] == 0
    assert _run(roots, capsys, "plan", "-d", "900", "-overwrite_plans_name", "Mine")[0] == 0
    code, out, _ = _run(
        roots, capsys, "preprocess", "-d", "900", "-plans_name", "Mine", "-c", "3d_lowres", "2d"
    )
    assert code == 0
    assert "INFO: configuration 3d_lowres is not in Mine.json of Dataset900_Synth; skipped" in out
    # the default planner names its data after its plans, as upstream
    assert (roots / "pre" / "Dataset900_Synth" / "Mine_2d" / "preprocess_summary.json").is_file()
    code, _, err = _run(roots, capsys, "preprocess", "-d", "900", "-p", "Mine", "-c", "3d_lowres")
    assert code == 2
    assert "error: none of the configurations ['3d_lowres'] is in Mine.json" in err


def test_bad_dataset_and_unsupported_classes_fail_before_work(roots: Path, capsys) -> None:
    raw = roots / "raw" / "Dataset900_Synth"
    next((raw / "labelsTr").iterdir()).unlink()
    code, _, err = _run(
        roots,
        capsys,
        "plan-and-preprocess",
        "-d",
        "900",
        "--verify_dataset_integrity",
        "-npfp",
        "1",
    )
    assert code == 2 and "nnunet-core plan-and-preprocess: error:" in err
    assert not (roots / "pre" / "Dataset900_Synth" / "dataset_fingerprint.json").exists()
    for flag, value in (("-preprocessor_name", "MyPreprocessor"), ("-fpe", "MyExtractor")):
        code, _, err = _run(roots, capsys, "plan-and-preprocess", "-d", "901", flag, value)
        assert code == 2
        implemented = (
            "DefaultPreprocessor" if flag == "-preprocessor_name" else "DatasetFingerprintExtractor"
        )
        assert err.strip() == (
            f"nnunet-core plan-and-preprocess: error: {flag} {value!r} is not supported: "
            f"only {implemented} "
            "is implemented"
        )
    assert not (roots / "pre" / "Dataset901_Second" / "dataset_fingerprint.json").exists()


def test_unknown_flag_from_a_real_process_is_one_line() -> None:
    command = [sys.executable, "-m", "nnunet_core", "preprocess", "-d", "900", "-plans_nme", "P"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (
        "nnunet-core preprocess: error: unknown option -plans_nme (did you mean -plans_name?)\n"
    )
