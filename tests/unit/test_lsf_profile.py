"""profiles/lsf: the bsub lines the LSF executor plugin builds for fold and prediction jobs.

LSF cannot run here (no mbatchd, no bsub). What is checked instead: the real Snakemake CLI runs
with ``--profile profiles/lsf``, so the installed snakemake-executor-plugin-lsf builds each
submission with its own code from a real Snakemake job, and runs it through a shell as it does on
a cluster. Stand-ins first on PATH answer the plugin's start-up questions (``badmin showconf
mbd``, ``lsclusters``; an lsb.params in a temporary LSF_CONFDIR) and a recording ``bsub`` keeps
the arguments it receives, then refuses the job, so nothing runs. The arguments are compared with
a golden line. Not checked: that a real mbatchd accepts the line, the signal LSF sends, or a
real job's end time (tests/unit/test_lsf_end_time.py reads stored bjobs output instead).
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
from workflow_helpers import REPO

PROFILE = REPO / "profiles" / "lsf" / "profile.yaml"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")

# Rules named and shaped as the workflow's (threads 8, a `gpu` resource): the profile's
# set-resources apply to them by name, as they do to the real train and predict rules.
SNAKEFILE = """
from nnunet_core import stop_signal

stop_signal.for_workflow_process()  # as workflow/rules/common.smk: exports NNUNET_STOP_SIGNAL


rule train:
    output:
        "results/{configuration}/fold_{fold}/checkpoint_final.pth",
    threads: 8
    resources:
        gpu=1,
    shell:
        "touch {output}"


rule predict:
    output:
        "predictions/{configuration}/done",
    threads: 8
    resources:
        gpu=1,
    shell:
        "touch {output}"
"""
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


def record_bsub(tmp_path: Path, target: str, **env: str) -> tuple[list[str], str]:
    """The arguments the plugin's bsub call for ``target`` passes, and snakemake's output."""
    require_plugin()
    root = tmp_path / "lsf"
    (root / "bin").mkdir(parents=True)
    for name, text in FAKES.items():
        path = root / "bin" / name
        path.write_text(text.format(root=root))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    params = root / "conf" / "lsbatch" / "testcluster" / "configdir" / "lsb.params"
    params.parent.mkdir(parents=True)
    params.write_text("Begin Parameters\nDEFAULT_QUEUE = normal\nEnd Parameters\n")
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    variables = {k: v for k, v in os.environ.items() if k != "NNUNET_STOP_SIGNAL"}
    variables.update(PATH=f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}", **env)
    variables["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    command = [SNAKEMAKE, "--profile", str(PROFILE), "--verbose", target]
    result = subprocess.run(
        command, cwd=tmp_path, env=variables, capture_output=True, text=True, timeout=300
    )
    output = result.stdout + result.stderr
    call = root / "bsub.call"
    assert call.exists(), output[-4000:]
    return call.read_text().split("\0")[:-1], output


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
    # the stop signal is the setting the trainer reads (USR1 unless NNUNET_STOP_SIGNAL says so)
    assert "-wa ${NNUNET_STOP_SIGNAL} -wt 10" in profile["set-resources"]["train"]["lsf_extra"]


@pytest.mark.slow
def test_fold_job_bsub_line(tmp_path) -> None:
    arguments, output = record_bsub(tmp_path, "results/3d_fullres/fold_0/checkpoint_final.pth")
    *options, job = golden(arguments, tmp_path)
    log = "<dir>/.snakemake/lsf_logs/rule_train/configuration=3d_fullres..fold=0/<uuid>.log"
    assert options == [
        "-J", "Snakemake_rule_train:configuration=3d_fullres,fold=0___(<uuid>)",
        "-o", log, "-e", log, "-env", "all",
        "-P", "myproject", "-q", "gpu", "-W", "1440",
        "-n", "8", "-R", "rusage[mem=8000.0]", "-R", "span[hosts=1]",  # 64000 MB / 8 slots
        "-gpu", "num=1", "-wa", "USR1", "-wt", "10",
        "-cwd", "<dir>",
    ]  # fmt: skip
    # the job runs the rule's own Snakemake, on this job only
    assert re.match(r"\S+/python3? -m snakemake ", job), job
    assert "--target-jobs 'train:configuration=3d_fullres,fold=0'" in job
    # the line as the plugin logged it before its shell ran it
    assert "bsub call: bsub -J 'Snakemake_rule_train:" in output


@pytest.mark.slow
def test_stop_signal_setting_reaches_the_warning_action(tmp_path) -> None:
    arguments, _ = record_bsub(
        tmp_path, "results/3d_fullres/fold_1/checkpoint_final.pth", NNUNET_STOP_SIGNAL="USR2"
    )
    assert arguments[arguments.index("-wa") : arguments.index("-wa") + 4] == [
        "-wa", "USR2", "-wt", "10",
    ]  # fmt: skip


@pytest.mark.slow
def test_prediction_job_bsub_line(tmp_path) -> None:
    arguments, _ = record_bsub(tmp_path, "predictions/3d_fullres/done")
    *options, _job = golden(arguments, tmp_path)
    log = "<dir>/.snakemake/lsf_logs/rule_predict/configuration=3d_fullres/<uuid>.log"
    assert options == [
        "-J", "Snakemake_rule_predict:configuration=3d_fullres___(<uuid>)",
        "-o", log, "-e", log, "-env", "all",
        "-P", "myproject", "-q", "gpu", "-W", "240",
        "-n", "8", "-R", "rusage[mem=4000.0]", "-R", "span[hosts=1]",
        "-gpu", "num=1",
        "-cwd", "<dir>",
    ]  # fmt: skip


def test_set_resources_name_rules_of_the_workflow() -> None:
    """Snakemake ignores set-resources of a rule that does not exist: each name must be one."""
    rules = set()
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        rules |= set(re.findall(r"^\s*(?:rule|checkpoint) (\w+):", smk.read_text(), re.M))
    profile = yaml.safe_load(PROFILE.read_text())
    assert set(profile["set-resources"]) == {"train", "predict"} <= rules
