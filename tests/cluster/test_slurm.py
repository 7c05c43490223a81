"""The SLURM profile against a real SLURM (tests/cluster/start_cluster.sh starts one).

Skipped where no SLURM answers (`sinfo` fails); CI starts the cluster first (.ci/start-cluster).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, job_counts, snakemake, tiny_config

pytestmark = pytest.mark.cluster

PROFILE = REPO / "profiles" / "slurm" / "profile.yaml"


def _slurm_reachable() -> str | None:
    if shutil.which("sinfo") is None:
        return "no SLURM here: `sinfo` not found (start one: sudo tests/cluster/start_cluster.sh)"
    result = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=20)
    if result.returncode != 0:
        return f"no SLURM reachable: `sinfo` failed: {result.stderr.strip()}"
    return None


_reason = _slurm_reachable()
if _reason:
    pytestmark = [pytest.mark.cluster, pytest.mark.skip(reason=_reason)]


def _plugin_installed() -> bool:
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
        import snakemake_executor_plugin_slurm_jobstep  # noqa: F401
    except ImportError:
        return False
    return True


needs_plugin = pytest.mark.skipif(
    not _plugin_installed(), reason="SLURM executor plugin missing: pip install -e '.[slurm]'"
)


def test_sbatch_job_runs(tmp_path):
    out = tmp_path / "out.txt"
    job = (
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-n1",
                "--gpus=1",
                "-o",
                str(out),
                "--wrap",
                "echo host=$(hostname) gpus=$CUDA_VISIBLE_DEVICES",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    for _ in range(300):
        state = subprocess.run(
            ["squeue", "-h", "-j", job, "--states=all", "-o", "%T"], capture_output=True, text=True
        ).stdout.strip()
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            break
        time.sleep(0.2)
    assert state == "COMPLETED", state
    assert re.search(r"gpus=\d", out.read_text()), out.read_text()


def test_profile_keys_are_commented():
    lines = PROFILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*[\w-]+:", line):
            assert lines[i - 1].lstrip().startswith("#"), f"uncommented key: {line!r}"
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "slurm"
    assert "--signal=USR1@" in profile["set-resources"]["train"]["slurm_extra"]


def _test_profile(tmp_path: Path) -> Path:
    """profiles/slurm plus what the test cluster needs (no slurmdbd: squeue; one partition)."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile.update(
        {
            "slurm-status-command": "squeue",
            "slurm-init-seconds-before-status-checks": 2,
            "slurm-keep-successful-logs": True,
            "latency-wait": 5,
            "verbose": True,
        }
    )
    for resources in [profile["default-resources"], *profile["set-resources"].values()]:
        resources.pop("slurm_account", None)
        resources["slurm_partition"] = "debug"
        resources["mem_mb"] = 1000
        resources["runtime"] = 30
    profile["set-resources"]["train"]["cpus_per_gpu"] = 1
    folder = tmp_path / "profile"
    folder.mkdir()
    (folder / "profile.yaml").write_text(yaml.safe_dump(profile))
    return folder


@needs_plugin
def test_dry_run_with_slurm_profile(tmp_path):
    config = tiny_config(tmp_path / "work")
    result = snakemake(tmp_path, config, "--profile", str(REPO / "profiles" / "slurm"), "-n")
    assert "synthesize_dataset" in job_counts(result.stdout)


@needs_plugin
@pytest.mark.slow
def test_demo_workflow_through_sbatch(tmp_path):
    config = tiny_config(tmp_path / "work")
    config["training"].update(gpus_per_job=1, folds=[0, 1], epochs=2)
    result = snakemake(
        tmp_path,
        config,
        "--profile",
        str(_test_profile(tmp_path)),
        "--workflow-profile",
        "none",
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    submits = re.findall(r"sbatch call: (.*)", output)
    counts = job_counts(output)
    assert counts.get("train", 0) >= 2, counts  # folds 0, 1 of each planned configuration
    # Every rule but the local target rules went through sbatch.
    assert len(submits) >= sum(counts.values()) - counts.get("all", 0), (len(submits), counts)
    train_submits = [s for s in submits if "rule_train" in s]
    assert len(train_submits) == counts["train"]
    for line in train_submits:
        assert "--gpus=1" in line
        assert "--signal=USR1@600" in line
