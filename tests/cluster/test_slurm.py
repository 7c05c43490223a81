"""The SLURM profile against a real SLURM (tests/cluster/start_cluster.sh starts one).

Skipped where no SLURM answers (`sinfo` fails) or the executor plugin is missing (conftest.py;
a failure instead under NNUNET_REQUIRE_CLUSTER=1); CI starts the cluster first (.ci/run).
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.helpers.workflow import REPO, job_counts, snakemake, tiny_config

pytestmark = pytest.mark.cluster

PROFILE = REPO / "profiles" / "slurm" / "profile.yaml"


def test_sbatch_job_runs(cluster, tmp_path):
    out = tmp_path / "out.txt"
    command = ["sbatch", "--parsable", "-n1", "--gpus=1", "-o", str(out), "--wrap"]
    command.append("echo host=$(hostname) gpus=$CUDA_VISIBLE_DEVICES")
    job = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
    job_id = job.stdout.strip().split(";")[0]
    state = cluster.wait_for(
        lambda: next((j.state for j in cluster.jobs(tmp_path) if j.id == job_id and j.ended), None),
        60,
        f"job {job_id} to end",
        interval=0.2,
    )
    assert state == "COMPLETED", state
    assert re.search(r"gpus=\d", out.read_text()), out.read_text()


def test_profile_keys_are_commented():
    lines = PROFILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*[\w-]+:", line):
            assert lines[i - 1].lstrip().startswith("#"), f"uncommented key: {line!r}"
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    # the stop signal is the setting the trainer reads (USR1 unless NNUNET_STOP_SIGNAL says so)
    assert "--signal=${NNUNET_STOP_SIGNAL}@" in profile["set-resources"]["train"]["slurm_extra"]


def test_dry_run_with_slurm_profile(tmp_path):
    config = tiny_config(tmp_path / "work")
    result = snakemake(tmp_path, config, "--profile", str(REPO / "profiles" / "slurm"), "-n")
    assert "synthesize_dataset" in job_counts(result.stdout)


@pytest.mark.slow
def test_demo_workflow_through_sbatch(cluster, tmp_path):
    """The whole workflow (the tests' demo, one configuration) through sbatch with `--profile`
    alone: the workflow profile (profiles/default) is loaded too and must not get in the way."""
    config = tiny_config(tmp_path / "work")
    # One configuration, 2 epochs (a checkpoint between them) of 2 iterations: the jobs' way
    # through sbatch is what is tested here, not the training or the selection (every rule's
    # way is the same; the pair ensemble's jobs: test_workflow_pipeline.py)
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(
        gpus_per_job=1, folds=[0, 1], epochs=2, iterations_per_epoch=2, val_iterations_per_epoch=1
    )
    profile = cluster.profile(tmp_path)
    result = snakemake(tmp_path, config, "--profile", str(profile), check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert re.search(r"and workflow specific profile \S*profiles/default for setting", output)
    submits = re.findall(r"sbatch call: (.*)", output)
    counts = job_counts(output)
    assert counts.get("train", 0) == 2, counts  # folds 0 and 1
    # Every rule but the local target rules went through sbatch.
    assert len(submits) >= sum(counts.values()) - counts.get("all", 0), (len(submits), counts)
    train_submits = [s for s in submits if "rule_train" in s]
    assert len(train_submits) == counts["train"]
    for line in train_submits:
        assert "--gpus=1" in line
        assert "--signal=USR1@600" in line
    states = {job.id: job.state for job in cluster.jobs(tmp_path)}
    assert len(states) == len(submits) and set(states.values()) == {"COMPLETED"}, states
