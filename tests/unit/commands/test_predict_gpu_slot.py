"""``predict --gpu-slot`` (the workflow's prediction jobs) takes a whole GPU through the slot locks.

No GPU here: ``nnUNet_num_gpus`` mocks the GPU count and a fold's slot is a real flock taken in
this process (flocks of separate opens exclude each other within one process too). The command
runs for real up to its first step after the slot (``prepare_inputs``), which is replaced to
record the ``CUDA_VISIBLE_DEVICES`` the prediction would start CUDA with.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from nnunet_core.cli import build_parser
from nnunet_core.cluster import gpu_slots
from nnunet_core.commands import predict
from nnunet_core.errors import ConfigurationError


class Reached(Exception):
    """The prediction got past its GPU slot."""


@pytest.fixture
def command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run ``nnunet-core predict`` with extra flags; returns the CUDA_VISIBLE_DEVICES it got."""
    for name in ("CUDA_VISIBLE_DEVICES", gpu_slots.HELD_ENV, "SLURM_JOB_ID", "LSB_JOBID"):
        monkeypatch.setenv(name, "")  # restored (unset) after the test
        monkeypatch.delenv(name)
    fast = functools.partial(gpu_slots.acquire_gpus, poll_seconds=0.05, timeout=0.3)
    monkeypatch.setattr(gpu_slots, "acquire_gpus", fast)

    def reached(*_args, **_kwargs):
        raise Reached(os.environ.get("CUDA_VISIBLE_DEVICES"))

    monkeypatch.setattr("nnunet_core.inference.predictor.prepare_inputs", reached)

    def run(*flags: str) -> str | None:
        argv = ["predict", "-i", str(tmp_path), "-o", str(tmp_path / "out"), "-m", "model"]
        args = build_parser("predict").parse_args([*argv, *flags])
        with pytest.raises(Reached) as got:
            predict.run(args)
        return got.value.args[0]

    yield run
    gpu_slots.release_all()


def fold_on_gpu_0(lock_dir: Path, gpus: int) -> None:
    """A fold sharing GPU 0 (folds_per_gpu 2: half of it), as train takes it."""
    env = {"nnUNet_num_gpus": str(gpus)}
    assert gpu_slots.acquire_gpus(1, lock_dir, environ=env, folds_per_gpu=2) == [0]


def test_a_prediction_takes_the_gpu_no_fold_holds(command, tmp_path, monkeypatch) -> None:
    locks = tmp_path / "locks"
    monkeypatch.setenv("nnUNet_num_gpus", "2")
    fold_on_gpu_0(locks, gpus=2)
    assert command("--gpu-slot", "--gpu-lock-dir", str(locks), "-device", "cuda") == "1"


def test_a_prediction_waits_while_a_fold_shares_the_only_gpu(
    command, tmp_path, monkeypatch
) -> None:
    locks = tmp_path / "locks"
    monkeypatch.setenv("nnUNet_num_gpus", "1")
    fold_on_gpu_0(locks, gpus=1)  # half the GPU is free; a prediction takes a whole one
    with pytest.raises(ConfigurationError, match="^no 1 free GPU slot\\(s\\) of 1 "):
        command("--gpu-slot", "--gpu-lock-dir", str(locks))


def test_no_slot_without_the_flag_or_on_the_cpu(command, tmp_path, monkeypatch) -> None:
    locks = tmp_path / "locks"
    monkeypatch.setenv("nnUNet_num_gpus", "1")
    fold_on_gpu_0(locks, gpus=1)
    assert command("--gpu-lock-dir", str(locks)) is None  # a user's own predict: as upstream
    assert command("--gpu-slot", "--gpu-lock-dir", str(locks), "-device", "cpu") is None
