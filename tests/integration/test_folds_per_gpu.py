"""Folds sharing a GPU (``training.folds_per_gpu``, issue 16 part 4) through the real Snakemake.

The user gives ``--resources gpu=K`` (K GPUs) as always; with folds_per_gpu k the workflow counts
K*k slots, so k fold jobs run at once per GPU and the (k+1)-th waits for one to finish. Each
fold job takes one share of the GPU through the slot locks (tests/unit/cluster/test_gpu_slots.py).
There is no GPU here: ``nnUNet_num_gpus=1`` mocks the GPU count for the locks (as
tests/integration/test_two_workflows.py does); ``device: auto`` finds no CUDA, so the folds train
on the CPU while each holds its share. Under a cluster executor the setting does not apply (the
scheduler gives every job its own GPU): one note line, and the jobs are those of k = 1.
"""

from __future__ import annotations

import importlib.util
import os
import re
from datetime import datetime
from pathlib import Path

import pytest

from nnunet_core.cluster.retry import command_prefix
from tests.helpers.workflow import DATASET, REPO, copy_prepared, prepared_config, snakemake

NOTE = "training.folds_per_gpu 2: --resources gpu=1 counts 2 GPU slots"
SHARING = "nnUNet_folds_per_gpu=2 "
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): ", re.MULTILINE)


def mocked_gpu_env() -> dict[str, str]:
    """One fake GPU for the slot locks (CUDA itself is absent)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    return {**env, "nnUNet_num_gpus": "1"}


def sharing_config(work: Path, folds: list[int], folds_per_gpu: int = 2) -> dict:
    """The prepared work_dir's config (``copy_prepared`` it to ``work`` for a real run)."""
    config = prepared_config(work)
    config["training"].update(
        folds=folds,
        epochs=1,
        iterations_per_epoch=2,
        val_iterations_per_epoch=1,
        retries=0,
        device="auto",
        folds_per_gpu=folds_per_gpu,
        gpu_lock_dir=str(work.parent / "gpu_locks"),
    )
    return config


def train_commands(output: str) -> list[str]:
    """The shell command of every train job of a dry run."""
    blocks = re.split(r"^(?:local)?rule ", output, flags=re.MULTILINE)[1:]
    return [
        re.search(r"^Shell command: (.*)$", block, re.MULTILINE).group(1)
        for block in blocks
        if block.startswith("train:")
    ]


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path) -> tuple[Path, dict]:
    """A planned dataset, so that dry runs list the train jobs."""
    workdir = tmp_path_factory.mktemp("planned")
    copy_prepared(prepared_work, workdir / "work")
    return workdir, sharing_config(workdir / "work", [0, 1, 2])


def test_a_wrong_value_is_one_line_before_any_job(tmp_path: Path) -> None:
    config = sharing_config(tmp_path / "work", [0], folds_per_gpu=0)
    result = snakemake(tmp_path, config, "-n", check=False)
    lines = (result.stdout + result.stderr).splitlines()
    assert result.returncode != 0
    assert "invalid config: training.folds_per_gpu: 0 is less than the minimum of 1" in lines
    assert not (tmp_path / "work").exists()


@pytest.mark.slow  # the prepared work_dir (shared), then a dry run
def test_local_fold_jobs_share_the_gpu_and_the_count_is_explained(planned) -> None:
    workdir, config = planned
    result = snakemake(workdir, config, "-n", "--resources", "gpu=1", env=mocked_gpu_env())
    assert any(line.startswith(NOTE) for line in result.stderr.splitlines()), result.stderr
    commands = train_commands(result.stdout)
    assert len(commands) == 3
    threads = "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} "
    runner = command_prefix(0)  # the retry runner (nnunet_core.cluster.retry), retries 0
    assert all(c.startswith(SHARING + threads + runner + "nnunet-core train ") for c in commands)


@pytest.mark.slow  # the prepared work_dir (shared), then a dry run under the SLURM profile
@pytest.mark.skipif(
    importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
    reason="SLURM plugin missing: make install-slurm",
)
def test_under_slurm_the_setting_is_a_note_and_each_job_has_its_gpu(planned) -> None:
    workdir, config = planned
    profile = str(REPO / "profiles" / "slurm")
    result = snakemake(workdir, config, "--profile", profile, "-n")
    output = result.stdout + result.stderr
    assert "note: training.folds_per_gpu 2 applies to local runs only" in output
    commands = train_commands(result.stdout)
    assert len(commands) == 3
    assert not any(SHARING in c for c in commands)


def held_interval(log: Path) -> tuple[datetime, datetime]:
    """First and last timestamp of the trainer's lines: inside the time it held its share."""
    stamps = [datetime.fromisoformat(s) for s in STAMP.findall(log.read_text())]
    assert stamps, log.read_text()
    return stamps[0], stamps[-1]


def train_events(output: str) -> list[str]:
    """'start' and 'end' of the train jobs, in the order Snakemake reports them."""
    events = []
    for line in output.splitlines():
        # a dry run's job block, or a live run's one line (the rule's message)
        if re.fullmatch(r"(local)?rule train:", line) or re.match(r"Job \d+: train ", line):
            events.append("start")
        elif re.fullmatch(r"Finished jobid: \d+ \(Rule: train\)", line):
            events.append("end")
    return events


@pytest.mark.slow  # three folds of one epoch, two at a time on the CPU: about 2 minutes
def test_two_folds_run_on_one_gpu_and_the_third_waits(tmp_path: Path, prepared_work: Path) -> None:
    work = copy_prepared(prepared_work, tmp_path / "work")
    config = sharing_config(work, [0, 1, 2])
    result = snakemake(
        tmp_path,
        config,
        *("--cores", "3", "trained", "--resources", "gpu=1"),  # cores leave room for 3
        env=mocked_gpu_env(),
    )
    output = result.stdout + result.stderr
    assert NOTE in output
    # Snakemake starts two folds, and the third only when one has finished.
    assert train_events(output) == ["start", "start", "end", "start", "end", "end"], output
    logs = [work / "logs" / DATASET / f"train_3d_fullres_fold{f}.log" for f in (0, 1, 2)]
    for log in logs:
        text = log.read_text()
        assert f"using GPU slot(s) 0 (locks in {tmp_path / 'gpu_locks'}; 2 folds per GPU)" in text
        assert "free GPU slot" not in text  # the count matched the shares: no job waited
    first, second, third = sorted(held_interval(log) for log in logs)
    assert second[0] < first[1]  # the first two trained at the same time on GPU 0
    assert third[0] >= min(first[1], second[1])  # never three at once
