"""profiles/lsf: the bsub line the LSF executor plugin builds for the workflow's fold jobs.

LSF cannot run here (no mbatchd, no bsub). What is checked instead: a copy of the shared work dir
that a local run prepared up to preprocessing (tests/conftest.py ``prepared_work``), on which the
real Snakemake CLI runs the real workflow with ``--profile profiles/lsf``, so the installed
snakemake-executor-plugin-lsf builds the submission of the workflow's own train rule with its own
code, and runs it through a shell as it does on a cluster. Stand-ins first on PATH answer the
plugin's start-up questions (``badmin showconf mbd``, ``lsclusters``; an lsb.params in a
temporary LSF_CONFDIR) and a recording ``bsub`` keeps the arguments it receives, then refuses the
job, so nothing runs. The arguments are compared with a golden line. The predict rule comes after
every fold has trained and the selection, too far for this test: its options are the same
builder's (tests/unit/cluster/test_lsf_options.py). Not checked: that a real mbatchd accepts the
line, the signal LSF sends, or a real job's end time (tests/unit/cluster/test_lsf_end_time.py
reads stored bjobs output instead).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nnunet_core.layout.results import SUMMARY_JSON, fold_dir, trained_model_dir, validation_dir
from nnunet_core.layout.roots import Roots, results_dataset_dir
from nnunet_core.planning.planner import get_preset
from tests.helpers.workflow import DATASET, REPO, copy_prepared, prepared_config

PROFILE = REPO / "profiles" / "lsf" / "profile.yaml"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
FAKES = {
    "badmin": """#!/bin/sh
echo "MBD configuration at Tue Mar  4 01:00:00 2025"
echo "LSB_SHAREDIR = {root}/work"
echo "LSF_CONFDIR = {root}/conf"
echo "LSF_UNIT_FOR_LIMITS = MB"
""",
    "lsclusters": """#!/bin/sh
echo "CLUSTER_NAME   STATUS   MASTER_HOST   ADMIN   HOSTS   SERVERS"
echo "testcluster    ok       master        lsfadmin  1      1"
""",
    "bsub": """#!/bin/sh
# records the plugin's bsub call, then refuses it: nothing runs
printf '%s\\0' "$@" > "{root}/bsub.call"
echo "recorded (test): not submitted" >&2
exit 1
""",
}


def require_plugin() -> None:
    """Skip without the plugin (``make install-lsf``); CI (NNUNET_REQUIRE_CLUSTER=1) fails."""
    try:
        import snakemake_executor_plugin_lsf  # noqa: F401
    except ImportError:
        reason = "LSF executor plugin missing: make install-lsf (pip install -e '.[lsf]')"
        if os.environ.get("NNUNET_REQUIRE_CLUSTER") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def preprocessed(
    tmp_path_factory: pytest.TempPathFactory, prepared_work: Path
) -> tuple[Path, dict]:
    """A work dir planned, split and preprocessed (3d_fullres) by a local run: the fold jobs are
    next (a copy of the shared ``prepared_work``, whose copies rerun no upstream job).

    Shared by the cases below, which change only what the fold jobs read (gpus_per_job, the
    signal), so no upstream job reruns and the one bsub call is the fold job's.
    """
    require_plugin()
    workdir = tmp_path_factory.mktemp("lsf_workflow")
    config = prepared_config(copy_prepared(prepared_work, workdir / "work"))
    # 8 threads as on a GPU node (bsub -n 8); no retries, so one refused submission ends the run
    config["training"].update(threads=8, retries=0)
    return workdir, config


def fold_target(config: dict, configuration: str, fold: int) -> str:
    """The train rule's output of one fold (its validation summary), built as
    nnunet_core.workflow.run_paths does."""
    roots = Roots.in_work_dir(Path(config["work_dir"]), raw=config["dataset"]["raw_root"])
    planning = config["planning"]
    plans_name = planning["plans_name"] or get_preset(planning["planner"]).plans_name
    model = trained_model_dir(
        results_dataset_dir(roots, DATASET),
        configuration,
        plans_name,
        config["training"]["trainer"],
    )
    return str(validation_dir(fold_dir(model, fold)) / SUMMARY_JSON)


def fake_lsf(root: Path) -> Path:
    """The stand-ins for LSF's commands in ``root``/bin (returned), and their lsb.params."""
    (root / "bin").mkdir(parents=True)
    for name, text in FAKES.items():
        path = root / "bin" / name
        path.write_text(text.format(root=root))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    params = root / "conf" / "lsbatch" / "testcluster" / "configdir" / "lsb.params"
    params.parent.mkdir(parents=True)
    params.write_text("Begin Parameters\nDEFAULT_QUEUE = normal\nEnd Parameters\n")
    return root / "bin"


def record_bsub(
    tmp_path: Path, prepared: tuple[Path, dict], target: str, **env: str
) -> tuple[list[str], str]:
    """The arguments of the plugin's bsub call for ``target``, and snakemake's output."""
    workdir, config = prepared
    root = tmp_path / "lsf"
    variables = {k: v for k, v in os.environ.items() if k != "NNUNET_STOP_SIGNAL"}
    variables.update(PATH=f"{fake_lsf(root)}{os.pathsep}{os.environ['PATH']}", **env)
    config_file = workdir / "lsf_config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    # as a user runs it: the profile's `jobs`, no --cores (which would cap the jobs' threads)
    command = [
        SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--configfile", str(config_file), "--profile", str(PROFILE.parent), "--verbose", target,
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=workdir, env=variables, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    call = root / "bsub.call"
    assert call.exists(), output[-4000:]
    return call.read_text().split("\0")[:-1], output


def with_gpus(prepared: tuple[Path, dict], gpus: int) -> tuple[Path, dict]:
    """The prepared work dir with ``training.gpus_per_job`` set (only the fold jobs read it)."""
    workdir, config = prepared
    changed = {**config, "training": {**config["training"], "gpus_per_job": gpus}}
    return workdir, changed


def golden(arguments: list[str], workdir: Path) -> list[str]:
    """The arguments with this run's folder and run id written as <dir> and <uuid>."""
    text = "\0".join(arguments).replace(str(workdir), "<dir>")
    return re.sub(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "<uuid>", text).split("\0")


def test_profile_keys_are_commented() -> None:
    lines = PROFILE.read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*[\w-]+:", line):
            assert lines[i - 1].lstrip().startswith("#"), f"uncommented key: {line!r}"
    profile = yaml.safe_load(PROFILE.read_text())
    assert profile["executor"] == "lsf"
    # the rules build their GPU and signal options from the config: a profile value would
    # replace them, with a GPU count that does not follow training.gpus_per_job
    for rule in ("train", "predict", "predict_shard"):
        assert "lsf_extra" not in profile["set-resources"][rule]


@pytest.mark.slow
def test_fold_job_bsub_line(tmp_path, preprocessed) -> None:
    workdir, config = preprocessed
    target = fold_target(config, "3d_fullres", 0)
    arguments, output = record_bsub(tmp_path, with_gpus(preprocessed, 1), target)
    *options, job = golden(arguments, workdir)
    log = "<dir>/.snakemake/lsf_logs/rule_train/configuration=3d_fullres..fold=0/<uuid>.log"
    assert options == [
        "-J", "Snakemake_rule_train:configuration=3d_fullres,fold=0___(<uuid>)",
        "-o", log, "-e", log, "-env", "all",
        "-P", "myproject", "-q", "gpu", "-W", "1440",
        # training.mem_mb / 8 slots: the config's 4000 MB (the demo's); the profile sets none
        "-n", "8", "-R", "rusage[mem=500.0]", "-R", "span[hosts=1]",
        "-gpu", "num=1", "-wa", "USR1", "-wt", "10",
        "-cwd", "<dir>",
    ]  # fmt: skip
    # the job runs the rule's own Snakemake, on this job only
    assert re.match(r"\S+/python3? -m snakemake ", job), job
    assert "--target-jobs 'train:configuration=3d_fullres,fold=0'" in job
    # the line as the plugin logged it before its shell ran it
    assert "bsub call: bsub -J 'Snakemake_rule_train:" in output


@pytest.mark.slow
def test_gpus_per_job_reach_the_gpu_request(tmp_path, preprocessed) -> None:
    """DDP on 2 GPUs: LSF grants 2, as many as `nnunet-core train -num_gpus 2` starts ranks."""
    target = fold_target(preprocessed[1], "3d_fullres", 2)
    arguments, _ = record_bsub(tmp_path, with_gpus(preprocessed, 2), target)
    assert arguments[arguments.index("-gpu") : arguments.index("-gpu") + 6] == [
        "-gpu", "num=2", "-wa", "USR1", "-wt", "10",
    ]  # fmt: skip


@pytest.mark.slow
def test_stop_signal_setting_reaches_the_warning_action(tmp_path, preprocessed) -> None:
    target = fold_target(preprocessed[1], "3d_fullres", 1)
    arguments, _ = record_bsub(
        tmp_path, with_gpus(preprocessed, 1), target, NNUNET_STOP_SIGNAL="USR2"
    )
    assert arguments[arguments.index("-wa") : arguments.index("-wa") + 4] == [
        "-wa", "USR2", "-wt", "10",
    ]  # fmt: skip


def test_set_resources_name_rules_of_the_workflow() -> None:
    """Snakemake ignores set-resources of a rule that does not exist: each name must be one."""
    rules = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        rules |= set(re.findall(r"^\s*(?:rule|checkpoint) (\w+):", smk.read_text(), re.M))
    profile = yaml.safe_load(PROFILE.read_text())
    assert set(profile["set-resources"]) == {"train", "predict", "predict_shard"} <= rules
