"""Retries only where they can help, through the real Snakemake and the real CLI.

* A wrong class name and a class that is no ``Trainer`` in ``training.trainer``: one line when
  the workflow starts, exit non-zero, no job started (the class is read from the file's syntax
  tree, nothing of it runs).
* A hook that raises (``set_learning_rate``): the fold's job fails once, not retried, although
  ``training.retries`` is 3: one attempt in the fold's provenance, one error line and one
  "not retried" line in the job's log, one Snakemake error block.
* The CLI's exit statuses that the retries read: a raising ``build_loss`` or augmentation
  (``training_transform``, in the data loading) is exit 3 naming the hook; torch running out of
  memory is exit 76, one line each.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from nnunet_core.cluster.exit_codes import EXIT_OUT_OF_MEMORY, EXIT_USER_CODE
from nnunet_core.cluster.retry import command_prefix
from nnunet_core.layout.results import NO_RETRY_MARKER
from tests.helpers.paths import REPO
from tests.helpers.training import CONFIG, cli
from tests.helpers.workflow import (
    DATASET,
    copy_prepared,
    prepared_config,
    snakemake,
    tiny_config,
)

pytestmark = pytest.mark.slow

TRAINERS = """\
import torch

from nnunet_core import Trainer


class RaisingTrainer(Trainer):
    def set_learning_rate(self, epoch):
        raise ValueError(f"no schedule for epoch {epoch}")


class LossTrainer(Trainer):
    def build_loss(self):
        raise KeyError("dice")


class AugmentTrainer(Trainer):
    def training_transform(self, ours):
        def broken(data, seg, rng):
            raise RuntimeError("flip went wrong")

        return broken


class MemoryTrainer(Trainer):
    @classmethod
    def build_network(cls, configuration, channels, outputs, deep_supervision):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")


class PlainClass:
    pass
"""


@pytest.fixture(scope="module")
def trainers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("my_methods") / "my_trainers.py"
    path.write_text(TRAINERS)
    return path


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        ("RaisingTrainr", "defines no class RaisingTrainr (did you mean RaisingTrainer?; "),
        ("PlainClass", "class PlainClass is no nnunet_core.Trainer (its bases: none)"),
    ],
)
def test_a_wrong_trainer_is_one_line_before_any_job(
    tmp_path: Path, trainers: Path, class_name: str, expected: str
) -> None:
    config = tiny_config(tmp_path / "work")
    config["training"]["trainer"] = f"{trainers}:{class_name}"
    result = snakemake(tmp_path, config, check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    lines = [line for line in output.splitlines() if expected in line]
    assert len(lines) == 1, output
    assert lines[0].startswith(f"config training.trainer: trainer '{trainers}:{class_name}': ")
    assert "Traceback" not in output and "Error in rule" not in output, output
    assert not (tmp_path / "work").exists()  # no job started: not even the synthetic data


@pytest.fixture(scope="module")
def hook_run(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path, trainers: Path):
    root = tmp_path_factory.mktemp("hook_raises")
    config = prepared_config(copy_prepared(prepared_work, root / "work"))
    config["training"].update(
        trainer=f"{trainers}:RaisingTrainer",
        folds=[0],
        epochs=1,
        iterations_per_epoch=2,
        val_iterations_per_epoch=1,
        retries=3,
    )
    fold = (
        root / "work" / "results" / DATASET / "RaisingTrainer__nnUNetPlans__3d_fullres" / "fold_0"
    )
    fold.mkdir(parents=True)  # a marker an earlier cluster attempt left: a new run removes it
    (fold / NO_RETRY_MARKER).write_text('{"exit_status": 3, "line": "earlier"}')
    result = snakemake(root, config, "trained", check=False)
    return root, result, config


def test_a_hook_that_raises_fails_its_job_once(hook_run, trainers: Path) -> None:
    root, result, _ = hook_run
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    fold = (
        root / "work" / "results" / DATASET / "RaisingTrainer__nnUNetPlans__3d_fullres" / "fold_0"
    )
    attempts = json.loads((fold / "provenance.json").read_text())["attempts"]
    assert len(attempts) == 1, attempts
    log = (root / "work" / "logs" / DATASET / "train_3d_fullres_fold0.log").read_text()
    raised = [line for line in log.splitlines() if "hook set_learning_rate raised" in line]
    assert len(raised) == 1, log
    assert raised[0].startswith("nnunet-core train: error: trainer '")
    assert raised[0].endswith("hook set_learning_rate raised ValueError: no schedule for epoch 0")
    line = TRAINERS.splitlines().index('        raise ValueError(f"no schedule for epoch {epoch}")')
    assert f"{trainers}:{line + 1}: hook set_learning_rate" in raised[0]  # the file and line
    assert "retry: exit 3 (the user's trainer code failed" in log and "not retried" in log
    assert "retry: attempt 2" not in log and "Traceback" not in log, log
    assert output.count("Error in rule train") == 1, output
    assert not (fold / NO_RETRY_MARKER).exists()  # removed at the start; none written locally
    # `nnunet-core status` shows the fold's own error, not the retry runner's line after it
    shown = cli({**os.environ}, "status", str(root / "work")).stdout
    failed = [line for line in shown.splitlines() if "train 3d_fullres fold 0" in line]
    assert len(failed) == 1 and "failed" in failed[0], shown
    assert failed[0].endswith(raised[0]) and "retry:" not in failed[0], shown


@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="SLURM plugin missing: make install-slurm",
)
def test_on_a_cluster_the_runner_leaves_retries_to_the_main_snakemake(hook_run) -> None:
    """A dry run under the SLURM profile: each fold's runner retries nothing itself (a new job
    per attempt) and knows the fold's marker."""
    root, _, config = hook_run
    profile = str(REPO / "profiles" / "slurm")
    dry = snakemake(root, config, "--profile", profile, "-n", "-p", "trained")
    commands = [line for line in dry.stdout.splitlines() if "nnunet-core train " in line]
    fold = (
        root / "work" / "results" / DATASET / "RaisingTrainer__nnUNetPlans__3d_fullres" / "fold_0"
    )
    runner = command_prefix(0, fold / NO_RETRY_MARKER)
    assert commands and all(runner + "nnunet-core train " in line for line in commands), dry.stdout


def train(env: dict[str, str], trainers: Path, class_name: str, results: Path):
    tiny = ("--epochs", "1", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0")
    name = f"{trainers}:{class_name}"
    args = ("train", "900", CONFIG, "0", "-tr", name, "-device", "cpu", *tiny)
    return cli(env, *args, "--results", str(results))


@pytest.mark.parametrize(
    ("class_name", "status", "ending"),
    [
        ("LossTrainer", EXIT_USER_CODE, "hook build_loss raised KeyError: 'dice'"),
        ("AugmentTrainer", EXIT_USER_CODE, "RuntimeError: flip went wrong"),
        ("MemoryTrainer", EXIT_OUT_OF_MEMORY, "else lower the patch or batch size"),
    ],
)
def test_the_train_commands_status_says_whose_failure_it_was(
    env: dict[str, str], trainers: Path, tmp_path: Path, class_name: str, status: int, ending: str
) -> None:
    result = train(env, trainers, class_name, tmp_path / "results")
    assert result.returncode == status, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and errors[0].endswith(ending), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    if class_name == "AugmentTrainer":
        assert f"hook training_transform ({trainers})" in errors[0]
