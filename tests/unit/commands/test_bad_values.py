"""Command-line values that used to get through (issue 14): each is refused before any work
starts, with one line naming the flag and the value, and nothing is written. Through the real
parser (``main``) and, where the exit code matters end to end, ``python -m nnunet_core`` in a
subprocess; the workflow config values are in tests/unit/workflow/test_check_config.py. Every
case is one parametrized entry with an id.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core.cli import main
from nnunet_core.errors import ConfigurationError
from nnunet_core.training.fold.setup import RANDOM_SPLIT_ENV, fold_keys

DATASET = "Dataset900_Synth"
CASES = [f"synth_{i:03d}" for i in range(6)]


def _fresh_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("nnUNet_")}
    for name in ("raw", "preprocessed", "results"):
        env[f"nnUNet_{name}"] = str(tmp_path / name)
    return env


# every command with a process count; -np is parsed (and refused) before the required arguments
PROCESS_COMMANDS = [
    "verify",
    "fingerprint",
    "extract-fingerprint",
    "preprocess",
    "plan-and-preprocess",
    "crossval",
    "ensemble-cv",
    "find-best-config",
    "ensemble",
    "evaluate",
    "evaluate-simple",
    "determine-postprocessing",
    "apply-postprocessing",
    "plot-overlay-pngs",
    "convert-msd",
]
PROCESS_CASES = [
    pytest.param([command, flag, value], id=f"{command}{flag}={value}")
    for command in PROCESS_COMMANDS
    for flag in ("-np", *(("-npfp",) if command == "plan-and-preprocess" else ()))
    for value in ("0", "-3")
]


@pytest.mark.parametrize("argv", PROCESS_CASES)
def test_a_process_count_below_one_is_refused(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in _fresh_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as caught:
        main(argv)
    err = capsys.readouterr().err
    assert caught.value.code == 2, err
    flag, value = argv[-2], argv[-1]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nnunet-core {argv[0]}: error: argument {flag}"), err
    assert f"expected an integer >= 1, got '{value}'" in lines[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(["--epochs", "0"], "--epochs must be >= 1, got 0", id="train-epochs-0"),
        pytest.param(["--epochs", "-2"], "--epochs must be >= 1, got -2", id="train-epochs-neg"),
        pytest.param(
            ["--iterations", "0"], "--iterations must be >= 1, got 0", id="train-iterations-0"
        ),
        pytest.param(
            ["--val-iterations", "0"],
            "--val-iterations must be >= 1, got 0",
            id="train-val-iterations-0",
        ),
        pytest.param(
            ["--save-every", "0"], "--save-every must be >= 1, got 0", id="train-save-every-0"
        ),
        pytest.param(
            ["--num-workers", "-1"], "--num-workers must be >= 0, got -1", id="train-workers-neg"
        ),
        pytest.param(["-num_gpus", "0"], "-num_gpus must be >= 1, got 0", id="train-num-gpus-0"),
    ],
)
def test_a_train_flag_out_of_range_is_refused_before_anything_runs(
    extra: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    for key, value in _fresh_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    code = main(["train", "900", "3d_fullres", "0", "-device", "cpu", *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == f"nnunet-core train: error: {message}\n"
    assert not list(tmp_path.iterdir())


def test_train_epochs_0_through_the_real_cli(tmp_path: Path) -> None:
    """`--epochs 0` is an error (never upstream's `or` default of 1000 epochs)."""
    result = subprocess.run(
        [sys.executable, "-m", "nnunet_core", "train", "900", "3d_fullres", "0", "--epochs", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_fresh_env(tmp_path),
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == "nnunet-core train: error: --epochs must be >= 1, got 0\n"
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------ a fold beyond the splits
def _preprocessed(tmp_path: Path, splits: bool) -> Path:
    """The smallest preprocessed tree `train` reads before it trains: plans, dataset.json, a
    data folder with six cases (their files are never opened before the split), splits."""
    pre = tmp_path / "preprocessed" / DATASET
    data = pre / "nnUNetPlans_3d_fullres"
    data.mkdir(parents=True)
    plans = {
        "plans_name": "nnUNetPlans",
        "configurations": {"3d_fullres": {"data_identifier": "nnUNetPlans_3d_fullres"}},
    }
    (pre / "nnUNetPlans.json").write_text(json.dumps(plans))
    dataset_json = {
        "channel_names": {"0": "MRI"},
        "labels": {"background": 0, "target": 1},
        "numTraining": 6,
        "file_ending": ".nii.gz",
    }
    (pre / "dataset.json").write_text(json.dumps(dataset_json))
    for case in CASES:
        (data / f"{case}_seg.b2nd").write_bytes(b"")
    if splits:
        from nnunet_core.planning.splits import kfold_splits

        (pre / "splits_final.json").write_text(json.dumps(kfold_splits(CASES)))
    return pre


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("fold", "splits"),
    [
        pytest.param(9, True, id="fold-9-of-splits-file"),
        pytest.param(5, True, id="fold-5-of-splits-file"),
        pytest.param(9, False, id="fold-9-splits-not-written-yet"),
    ],
)
def test_a_fold_beyond_the_splits_is_an_error(
    fold: int, splits: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RANDOM_SPLIT_ENV, raising=False)
    pre = _preprocessed(tmp_path, splits)
    before = _tree(tmp_path)
    state = "has" if splits else r"\(not written yet\) would have"
    with pytest.raises(
        ConfigurationError,
        match=rf"^fold {fold} does not exist: {pre / 'splits_final.json'} {state} 5 folds, 0-4 "
        rf"\(or 'all'\); {RANDOM_SPLIT_ENV}=1 trains it on upstream's random 80:20 split$",
    ):
        fold_keys(pre, fold, CASES)
    assert _tree(tmp_path) == before


def test_upstreams_random_split_of_a_fold_beyond_the_splits_is_an_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pre = _preprocessed(tmp_path, splits=True)
    monkeypatch.setenv(RANDOM_SPLIT_ENV, "1")
    train, val = fold_keys(pre, 9, CASES)
    assert len(train) == 4 and len(val) == 2 and not set(train) & set(val)
    assert fold_keys(pre, 9, CASES) == (train, val)  # seeded with 12345 + fold


def test_train_fold_9_through_the_real_cli(tmp_path: Path) -> None:
    """`nnunet-core train ... 9` with five folds: exit 2 naming splits_final.json, no results."""
    pre = _preprocessed(tmp_path, splits=True)
    env = _fresh_env(tmp_path)
    env.pop(RANDOM_SPLIT_ENV, None)
    before = _tree(tmp_path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nnunet_core",
            "train",
            DATASET,
            "3d_fullres",
            "9",
            "-device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"nnunet-core train: error: fold 9 does not exist: {pre / 'splits_final.json'} has 5 "
        f"folds, 0-4 (or 'all'); {RANDOM_SPLIT_ENV}=1 trains it on upstream's random 80:20 split"
    ], result.stderr
    assert _tree(tmp_path) == before
