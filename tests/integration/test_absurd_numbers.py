"""Absurd numbers (issue 51, part 5): ``train`` flags beyond the maxima of
``nnunet_core.training.limits`` and a workflow config beyond the schema's (``epochs: 10**30``,
``splits.num_folds: 10**12``, through the real Snakemake) are one line naming the flag or key,
exit 2 (Snakemake: 1), no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli_lines import one_line, run_cli, run_main
from tests.helpers.workflow import snakemake, tiny_config

DATASET = "Dataset900_Synth"


# ---------------------------------------------------------------- absurd numbers: train flags

HUGE = str(10**30)
TRAIN_MAXIMA = [
    pytest.param(["--epochs", HUGE], f"--epochs must be <= 100000, got {HUGE}", id="epochs"),
    pytest.param(["--epochs", "100001"], "--epochs must be <= 100000, got 100001", id="epochs+1"),
    pytest.param(
        ["--iterations", "1000000"], "--iterations must be <= 100000, got 1000000", id="iterations"
    ),
    pytest.param(
        ["--val-iterations", HUGE], f"--val-iterations must be <= 100000, got {HUGE}", id="val"
    ),
    pytest.param(["--save-every", HUGE], "--save-every must be <= 100000", id="save-every"),
    pytest.param(["--num-workers", "5000"], "--num-workers must be <= 1024", id="workers"),
    pytest.param(["-num_gpus", "65"], "-num_gpus must be <= 64, got 65", id="num-gpus"),
    pytest.param(["--stop-margin", "1e30"], "--stop-margin must be <= 31536000", id="stop-margin"),
    pytest.param(["--stop-margin", "nan"], "--stop-margin must be >= 0, got nan", id="margin-nan"),
    pytest.param(["--seed", str(2**32)], "--seed must be <= 4294967295", id="seed-2**32"),
    pytest.param(["--seed", "-1"], "--seed must be >= 0, got -1", id="seed-negative"),
    pytest.param(
        ["-tr", "nnUNetTrainer_1000000epochs"],
        "trainer 'nnUNetTrainer_1000000epochs': 1000000 epochs is more than the 100000 allowed",
        id="trainer-name-epochs",
    ),
]


@pytest.mark.parametrize(("extra", "message"), TRAIN_MAXIMA)
def test_a_train_flag_beyond_its_maximum_is_one_line(
    extra: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("raw", "preprocessed", "results"):
        monkeypatch.setenv(f"nnUNet_{name}", str(tmp_path / name))
    code, err = run_main(capsys, "train", "900", "3d_fullres", "0", "-device", "cpu", *extra)
    assert code == 2, err
    one_line(err, "train", message)
    assert not list(tmp_path.iterdir())


def test_epochs_10_to_the_30_through_the_real_cli(tmp_path: Path) -> None:
    code, err = run_cli(tmp_path, "train", "900", "3d_fullres", "0", "--epochs", HUGE)
    assert code == 2, err
    assert err == f"nnunet-core train: error: --epochs must be <= 100000, got {HUGE}\n"
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- absurd numbers: workflow config

WORKFLOW_MAXIMA = [
    pytest.param(
        {"training": {"epochs": 10**30}},
        f"invalid config: training.epochs: {10**30} is greater than the maximum of 100000",
        id="epochs-10**30",
    ),
    pytest.param(
        {"splits": {"num_folds": 10**12}},
        f"invalid config: splits.num_folds: {10**12} is greater than the maximum of 1000",
        id="num-folds-10**12",
    ),
    pytest.param(
        {"training": {"iterations_per_epoch": 10**9, "retries": 10**6}},
        "invalid config: training.iterations_per_epoch: 1000000000 is greater than the maximum "
        "of 100000; training.retries: 1000000 is greater than the maximum of 1000",
        id="iterations-and-retries",
    ),
]


@pytest.mark.parametrize(("changes", "message"), WORKFLOW_MAXIMA)
def test_a_config_number_beyond_its_maximum_stops_the_workflow(
    tmp_path: Path, changes: dict, message: str
) -> None:
    config = tiny_config(tmp_path / "work")
    for section, values in changes.items():
        config[section] = {**config[section], **values}
    result = snakemake(tmp_path, config, "-n", check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert message in output.splitlines(), output
    assert "Traceback" not in output
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_a_split_seed_numpy_cannot_take_is_one_line(
    tmp_path: Path, make_raw_dataset, seed: str, capsys
) -> None:
    root = tmp_path
    make_raw_dataset(root / "raw" / DATASET, num_training=2, num_test=0, shape=(8, 16, 16))
    target = root / f"pre_seed_{seed}"
    flags = ["--raw", root / "raw", "--preprocessed", target, "--folds", "2", "--seed", seed]
    code, err = run_main(capsys, "splits", "-d", DATASET, *flags)
    assert code == 2, err
    one_line(err, "splits", f"the split seed must be between 0 and 4294967295, got {seed}")
    assert not target.exists()
