"""Training a fold through the real CLI in tests: the tiny dataset's names, the CLI call, the
tiny preprocessed dataset every training test module starts from.

Plain functions (not fixtures), so test modules import them by name; the ``env`` fixture that
builds the dataset once per module lives in tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from nnunet_core import TrainerSettings

DATASET = "Dataset900_Synth"
CONFIG = "3d_tiny"
MODEL = f"nnUNetTrainer__nnUNetPlans__{CONFIG}"
# 25 iterations x 8 epochs (200 steps of batch 2) reach organ Dice ~0.75-0.85 on this data.
LEARNING_SCHEDULE = ["--epochs", "8", "--iterations", "25", "--val-iterations", "5"]
# the shared fold's training stdout, beside its roots (test_training asserts on it)
TRAIN_STDOUT = "train_stdout.txt"


def cli(env: dict[str, str], *args: str, module: str = "nnunet_core", timeout: float = 600):
    """``python -m <module> <args>`` of this interpreter, output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``result``, or the test fails with the command's output."""
    if result.returncode != 0:
        pytest.fail(f"command failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def check_stopped(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``result`` of a ``train`` that stopped early: exit ``EXIT_STOPPED`` with its one stderr
    line, else the test fails with the command's output."""
    from nnunet_core.cluster.stop_signal import EXIT_STOPPED

    stopped_line = [line for line in result.stderr.splitlines() if " stopped at epoch " in line]
    if result.returncode != EXIT_STOPPED or len(stopped_line) != 1:
        pytest.fail(
            f"expected a stop (exit {EXIT_STOPPED}, one stderr line), got {result.returncode}:"
            f"\n{result.stdout}\n{result.stderr}"
        )
    assert stopped_line[0].endswith(f"exit {EXIT_STOPPED}: the retry continues with --c")
    return result


def roots_env(root: Path) -> dict[str, str]:
    """This environment with the three nnU-Net roots under ``root`` and one OpenMP thread."""
    return {
        **os.environ,
        "nnUNet_raw": str(root / "raw"),
        "nnUNet_preprocessed": str(root / "preprocessed"),
        "nnUNet_results": str(root / "results"),
        "OMP_NUM_THREADS": "1",
    }


def prepare_tiny_training(root: Path, make_raw_dataset: Callable[..., Path]) -> dict[str, str]:
    """Roots under ``root`` of a tiny preprocessed dataset with the ``3d_tiny`` configuration,
    made with the real commands (synthesize, fingerprint, plan, preprocess, splits).

    Threads: ``OMP_NUM_THREADS=1``: the tests assume 2 CPU cores, one for the training process
    and one for its data worker.
    """
    make_raw_dataset(root / "raw" / DATASET, num_training=6, num_test=0)
    environment = roots_env(root)
    check(cli(environment, "fingerprint", "-d", "900", "-np", "2"))
    check(cli(environment, "plan", "-d", "900"))
    plans_path = root / "preprocessed" / DATASET / "nnUNetPlans.json"
    plans = json.loads(plans_path.read_text())
    n_stages = plans["configurations"]["3d_fullres"]["architecture"]["arch_kwargs"]["n_stages"]
    features = [min(4 * 2**i, 32) for i in range(n_stages)]
    overrides = {
        CONFIG: {
            "inherits_from": "3d_fullres",
            "architecture": {"arch_kwargs": {"features_per_stage": features}},
        }
    }
    check(cli(environment, "plan", "-d", "900", "--overrides", json.dumps(overrides)))
    check(cli(environment, "preprocess", "-d", "900", "-c", CONFIG, "-np", "2", "--no-pbar"))
    check(cli(environment, "splits", "-d", "900"))
    return environment


def train_shared_fold(root: Path, template: Path) -> None:
    """``root``: a copy of the tiny dataset's roots ``template`` in which fold 0 of ``MODEL`` was
    trained as tests/integration/test_training.py checks it: ``python -m nnunet_core.train`` (the
    torchrun entry point), ``LEARNING_SCHEDULE``, ``--npz``, one data worker. Its stdout is kept
    in ``root / TRAIN_STDOUT``. The longest schedule any user needs, so one fold serves them all
    (conftest's ``trained_tiny_fold``)."""
    shutil.copytree(template, root, dirs_exist_ok=True)
    args = ["900", CONFIG, "0", "-device", "cpu", "--npz", "--num-workers", "1"]
    result = check(cli(roots_env(root), *args, *LEARNING_SCHEDULE, module="nnunet_core.train"))
    (root / TRAIN_STDOUT).write_text(result.stdout)


def copy_shared_model(shared: Path, env: dict[str, str]) -> Path:
    """The shared fold's model folder (``train_shared_fold``: plans, dataset.json, fingerprint,
    fold_0) copied into ``env``'s results, where it would be had ``env`` trained it; returns the
    copy's fold_0. Its validation summary still names the folders it was trained in."""
    source = Path(roots_env(shared)["nnUNet_results"]) / DATASET / MODEL
    target = Path(env["nnUNet_results"]) / DATASET / MODEL
    shutil.copytree(source, target, dirs_exist_ok=True)
    return target / "fold_0"


def run_fold_in_process(
    roots_env_vars: dict[str, str],
    results: Path | str,
    dataset: str,
    configuration: str,
    fold: int,
    settings: TrainerSettings,
    stops: bool = False,
    **flags,
) -> str:
    """One fold through ``run_fold`` in this process on the CPU with one torch thread (restored
    after), stdout captured: cheaper than the CLI where the test needs no real process.
    ``stops``: the fit is expected to stop early (``run_fold`` returns ``EXIT_STOPPED``)."""
    import contextlib
    import io

    import torch

    from nnunet_core.cluster.stop_signal import EXIT_STOPPED
    from nnunet_core.layout.roots import Roots
    from nnunet_core.training.fold.run import FoldFlags, FoldRequest, run_fold

    env = roots_env_vars
    request = FoldRequest(
        roots=Roots.from_env(env["nnUNet_raw"], env["nnUNet_preprocessed"], str(results)),
        dataset=dataset,
        configuration=configuration,
        fold=fold,
        plans="nnUNetPlans",
        settings=settings,
        device=torch.device("cpu"),
        flags=FoldFlags(**flags),
    )
    out = io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(out):
            assert run_fold(request) == (EXIT_STOPPED if stops else 0)
    finally:
        torch.set_num_threads(threads)
    return out.getvalue()
