"""Config and command-line values that used to get through (issue 14): each is refused before
any work starts, with one line naming the key or flag and the value, and nothing is written.

Workflow config values at the level of ``check_config`` (what common.smk calls); the real
Snakemake runs are in tests/integration/test_bad_config_values.py. Command-line values through
the real parser (``main``) and, where the exit code matters end to end, ``python -m
nnunet_core`` in a subprocess. Every case is one parametrized entry with an id.
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
from nnunet_core.training.fold_setup import RANDOM_SPLIT_ENV, fold_keys
from nnunet_core.workflow.config import Execution, check_config

DATASET = "Dataset900_Synth"
CASES = [f"synth_{i:03d}" for i in range(6)]
LOCAL_RUN = Execution()  # `snakemake --cores N`: no dry run, no --jobs, not inside a job


def _config(**training) -> dict:
    return {
        "work_dir": "work",
        "dataset": {"id": 900, "name": "Synth", "synthetic": {"enabled": True}},
        "planning": {"configurations": None, "overrides": {}},
        "training": {"trainer": "nnUNetTrainer", "folds": [0, 1, 2, 3, 4], "nodes": 1, **training},
        "splits": {"num_folds": 5},
    }


# ------------------------------------------------------------------ workflow config values
BAD_CONFIGS = [
    pytest.param(
        _config(folds=[7]),
        r"^config training\.folds: fold 7 does not exist: splits\.num_folds is 5, so the folds "
        r"are 0-4 \(or 'all'\)$",
        id="config-folds-7-of-5",
    ),
    pytest.param(
        _config(folds=[0, 5]),
        r"^config training\.folds: fold 5 does not exist: splits\.num_folds is 5",
        id="config-folds-5-of-5",
    ),
    pytest.param(
        _config(folds=[-1]),
        r"^config training\.folds: fold -1 does not exist",
        id="config-folds-minus-1",
    ),
    pytest.param(
        _config(folds=[0, 0]),
        r"^config training\.folds: fold 0 is listed twice in \[0, 0\]$",
        id="config-folds-duplicate",
    ),
    pytest.param(
        _config(folds=["all", 1, "all"]),
        r"^config training\.folds: fold all is listed twice",
        id="config-folds-all-twice",
    ),
    pytest.param(
        _config(folds=[1, "1"]),
        r"^config training\.folds: fold 1 is listed twice",
        id="config-folds-same-fold-as-text",
    ),
    pytest.param(
        _config(folds=["ALL"]),
        r"^config training\.folds: 'ALL' is not a fold \(a number >= 0, or 'all'\)$",
        id="config-folds-not-a-fold",
    ),
    pytest.param(
        _config(trainer="nnUNetTrainerBogus"),
        r"^config training\.trainer: unknown trainer 'nnUNetTrainerBogus' \(known: nnUNetTrainer,",
        id="config-trainer-unknown",
    ),
    pytest.param(
        _config(trainer="nnUNetTrainer_0epochs"),
        r"^config training\.trainer: unknown trainer 'nnUNetTrainer_0epochs'",
        id="config-trainer-0epochs",
    ),
    pytest.param(
        _config(nodes=2),
        r"^config training\.nodes: 2 needs the SLURM executor \(--profile profiles/slurm\)",
        id="config-nodes-2-local-run",
    ),
    pytest.param(
        {**_config(), "planning": {"configurations": ["3d_fulres"], "overrides": {}}},
        r"^config planning\.configurations: '3d_fulres' is no configuration the planner makes or "
        r"planning\.overrides defines \(possible: 2d, 3d_fullres, 3d_lowres, 3d_cascade_fullres\)$",
        id="config-configurations-typo",
    ),
]


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS)
def test_a_bad_config_value_is_one_line_naming_the_key(config: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        check_config(config, LOCAL_RUN)
    assert "\n" not in str(caught.value)


def test_folds_beyond_a_splits_file_in_the_raw_dataset(tmp_path: Path) -> None:
    """A user's raw splits_final.json (the splits rule copies it) sets the fold count."""
    raw = tmp_path / "raw"
    (raw / DATASET).mkdir(parents=True)
    user_file = raw / DATASET / "splits_final.json"
    user_file.write_text(json.dumps([{"train": ["a"], "val": ["b"]}] * 3))
    config = _config(folds=[0, 1, 2])
    config["dataset"] = {"id": 900, "name": "Synth", "raw_root": str(raw)}
    config["splits"]["num_folds"] = 10
    check_config(config, LOCAL_RUN)
    config["training"]["folds"] = [3]
    with pytest.raises(
        ConfigurationError,
        match=rf"fold 3 does not exist: {user_file} has 3 folds, 0-2 \(or 'all'\)$",
    ):
        check_config(config, LOCAL_RUN)


@pytest.mark.parametrize(
    ("training", "planning"),
    [
        pytest.param({"folds": [0, 1, 2, 3, 4, "all"]}, {}, id="every-fold-and-all"),
        pytest.param({"folds": ["3"]}, {}, id="fold-as-text"),
        pytest.param({"trainer": "nnUNetTrainer_5epochs_NoMirroring"}, {}, id="trainer-variant"),
        pytest.param(
            {},
            {"configurations": ["3d_small"], "overrides": {"3d_small": {"inherits_from": "2d"}}},
            id="configuration-from-overrides",
        ),
        pytest.param({}, {"configurations": ["3d_lowres"]}, id="configuration-the-plans-decide"),
    ],
)
def test_good_values_pass(training: dict, planning: dict) -> None:
    config = _config(**training)
    config["planning"].update(planning)
    check_config(config, LOCAL_RUN)


@pytest.mark.parametrize(
    "execution",
    [
        pytest.param(Execution(dry_run=True), id="dry-run"),
        pytest.param(Execution(max_jobs=50), id="cluster-executor-jobs"),
        pytest.param(Execution(remote_job=True), id="inside-the-slurm-job"),
        pytest.param(None, id="outside-snakemake"),
    ],
)
def test_several_nodes_where_a_cluster_may_run_the_jobs(execution: Execution | None) -> None:
    """Snakemake names the executor only after parsing; what it does tell is enough here."""
    check_config(_config(nodes=2, gpus_per_job=2), execution)


# ------------------------------------------------------------------ command-line values
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
