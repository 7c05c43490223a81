"""The sbatch lines the SLURM plugin builds for 1-GPU, N-GPU and multi-node training jobs.

A recording ``sbatch`` first on PATH keeps each line and asks the real slurmctld whether it
would accept it (``sbatch --test-only``), then fails the submission, so nothing runs. The
multi-node line asks for 2 nodes, which this one-node test cluster cannot give: there the check
is that slurmctld's only objection is the node count.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from tests.helpers.workflow import REPO, snakemake

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MODEL = "Dataset900_Synth/nnUNetTrainer__nnUNetPlans__3d_fullres"
RECORDER = """#!/bin/sh
# records the plugin's sbatch call, asks slurmctld whether it would run it, then refuses it
printf '%s\\0' "$@" > "{record}.call"
/usr/bin/env PATH="{real_path}" sbatch --test-only "$@" >> "{record}.verdicts" 2>&1 \\
    && echo ACCEPTED >> "{record}.verdicts" || echo REFUSED >> "{record}.verdicts"
echo "recorded (test): not submitted" >&2
exit 1
"""


@pytest.fixture(scope="module")
def prepared(cluster, prepared_workdir, slurm_test_profile, tmp_path_factory):
    """A copy of the locally preprocessed run folder, so that the train jobs come next."""
    folder = cluster.copy_prepared(prepared_workdir, tmp_path_factory.mktemp("sbatch") / "run")
    config = cluster.tiny_config()
    config["training"].update(retries=0, folds=[0])
    return folder, config, slurm_test_profile(folder)


def _record_train_submission(prepared, tmp_path: Path, **training) -> tuple[list[str], str]:
    """The arguments of fold 0's train job's sbatch call, and slurmctld's verdict on them."""
    target = f"work/results/{MODEL}/fold_0/validation/summary.json"
    return _record_submission(prepared, tmp_path, target, **training)


def _record_submission(
    prepared, tmp_path: Path, target: str, *flags: str, **training
) -> tuple[list[str], str]:
    """The arguments of the first sbatch call for ``target``, and slurmctld's verdict."""
    folder, config, profile = prepared
    config = {**config, "training": {**config["training"], **training}}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    record = tmp_path / "sbatch"
    recorder = bin_dir / "sbatch"
    recorder.write_text(RECORDER.format(record=record, real_path=os.environ["PATH"]))
    recorder.chmod(recorder.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    args = ["--profile", str(profile), target, *flags]  # relative, as the work_dir
    result = snakemake(folder, config, *args, check=False, env=env)
    call = record.with_suffix(".call")
    assert call.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    arguments = call.read_text().split("\0")[:-1]
    return arguments, record.with_suffix(".verdicts").read_text()


def _options(arguments: list[str]) -> tuple[list[str], str]:
    """The sbatch options of a call and its --wrap'd command (the Snakemake inside the job)."""
    wrapped = [a for a in arguments if a.startswith("--wrap=")]
    assert len(wrapped) == 1, arguments
    return [a for a in arguments if not a.startswith("--wrap=")], wrapped[0]


def test_one_gpu_fold_job(prepared, tmp_path) -> None:
    arguments, verdict = _record_train_submission(prepared, tmp_path, gpus_per_job=1, nodes=1)
    options, wrapped = _options(arguments)
    assert "--gpus=1" in options
    assert "--cpus-per-gpu=1" in options  # the test overlay's cpus_per_gpu
    assert "--signal=USR1@600" in options  # the warning before the walltime, steps only
    assert not any(o.startswith(("--nodes", "--gres", "--ntasks")) for o in options), options
    assert ["-t", "30"] == options[options.index("-t") : options.index("-t") + 2]
    assert "ACCEPTED" in verdict, verdict


def test_n_gpu_fold_job_is_one_task_with_all_gpus(prepared, tmp_path) -> None:
    arguments, verdict = _record_train_submission(prepared, tmp_path, gpus_per_job=2, nodes=1)
    options, wrapped = _options(arguments)
    assert "--gpus=2" in options and "--cpus-per-gpu=1" in options
    assert not any(o.startswith(("--nodes", "--gres")) for o in options), options
    assert "--target-jobs 'train:configuration=3d_fullres,fold=0'" in wrapped
    assert "ACCEPTED" in verdict, verdict


def test_multi_node_fold_job_asks_for_gpus_on_every_node(prepared, tmp_path) -> None:
    arguments, verdict = _record_train_submission(prepared, tmp_path, gpus_per_job=2, nodes=2)
    options, wrapped = _options(arguments)
    assert "--nodes=2" in options and "--ntasks=2" in options
    assert "--gres=gpu:2" in options  # per node; --gpus=N would be N for the whole job
    assert not any(o.startswith(("--gpus=", "--ntasks-per-gpu")) for o in options), options
    assert "--signal=USR1@600" in options
    # this cluster has one node: slurmctld objects to the node count and to nothing else
    assert "REFUSED" in verdict and "node configuration is not available" in verdict, verdict


def test_partitions_file_sends_training_to_gpu_and_the_rest_to_cpu(prepared, tmp_path) -> None:
    """profiles/slurm/partitions.example.yaml, as its header says: no slurm_partition lines."""
    folder, config, profile = prepared
    settings = yaml.safe_load((profile / "profile.yaml").read_text())
    settings["slurm-partition-config"] = str(REPO / "profiles/slurm/partitions.example.yaml")
    for resources in [settings["default-resources"], *settings["set-resources"].values()]:
        resources.pop("slurm_partition", None)
    by_partition = tmp_path / "profile"
    by_partition.mkdir()
    (by_partition / "profile.yaml").write_text(yaml.safe_dump(settings))
    prepared = (folder, config, by_partition)
    train, _ = _record_train_submission(prepared, tmp_path / "train", gpus_per_job=1)
    splits, _ = _record_submission(
        prepared, tmp_path / "splits", "work/preprocessed/Dataset900_Synth/splits_final.json",
        "--forcerun", "splits",
    )  # fmt: skip
    assert _partition(train) == "gpu" and _partition(splits) == "cpu"


def _partition(arguments: list[str]) -> str:
    return arguments[arguments.index("-p") + 1]
