"""Every command README.md and the docs pages show works as printed (issues 11 and 48).

Each documented command is run from a folder that looks like a fresh checkout
(``readme_commands.mirror_checkout``), as printed. Only these additions are made, each named
where it is made: ``-n`` (a dry run, where a GPU or a cluster is needed; the rendered jobs are
asserted instead), a target or a tiny schedule for a real run, ``make -n`` for the make lines
that install into the venv (running them would reinstall the venv under the running tests;
`.ci/run` runs `make install-slurm` and `make test` as printed), and for `make lint` ``-o`` of the
docs tools' stamp and ``MKDOCS=:`` (its site build is tests/unit/test_docs_site.py's). A command
added to the documents without a test here fails ``test_every_documented_command_is_tested``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers.readme_commands import (
    CLI_FIRST,
    DEMO,
    DEMO_TARGETS_FIRST,
    PREDICT_NEW_SCANS,
    PREDICT_NEW_SCANS_SLURM,
    STATUS,
    block_starting_with,
    documented_commands,
    mirror_checkout,
    run,
    user_shell,
    with_flags,
)

pytestmark = pytest.mark.slow

TEST = "make test"
GPU_INSTALL = (
    'make demo TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"'
)
OWN_DATA = (
    ".venv/bin/snakemake --cores 8 --config "
    'dataset="{id: 4, name: Hippocampus, raw_root: $nnUNet_raw}"'
)
UNLOCK = f"{OWN_DATA} --unlock"
COPY_TEMPLATE = "cp config/config.yaml my.yaml"
OWN_DATA_FILE = ".venv/bin/snakemake --cores 8 --configfile my.yaml"
INSTALL_SLURM = "make install-slurm"
SLURM = ".venv/bin/snakemake --profile profiles/slurm --configfile my.yaml"
WORKSTATION = ".venv/bin/snakemake --cores 32 --resources gpu=4 --configfile my.yaml"
PLANNED = ".venv/bin/snakemake planned --cores 8 --configfile my.yaml"
SLURM_PREVIEW = ".venv/bin/snakemake -n --profile profiles/slurm --configfile my.yaml"
INSTALL_PROFILE = "make install-profile"
LINT = "make lint"
TEST_FAST = "make test-fast"
TINY_SCHEDULE = (
    'training="{epochs: 1, iterations_per_epoch: 2, val_iterations_per_epoch: 1, '
    'folds: [0], num_workers: 0}" planning="{configurations: [2d]}"'
)
USER_DATASET = "Dataset004_Hippocampus"


def make_installs(command: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """The pip lines `make` would run for ``command`` (``make -n``)."""
    planned = run(with_flags(command, "-n"), cwd, env).stdout
    return [line for line in planned.splitlines() if "pip install" in line]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return mirror_checkout(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def user_env(tmp_path_factory) -> dict[str, str]:
    """A user's nnUNet_raw holding a dataset that is not the demo's (other id, name and sizes)."""
    raw = tmp_path_factory.mktemp("nnUNet_raw")
    subprocess.run(
        [
            str(Path(os.sys.executable).parent / "nnunet-core"),
            "synthesize",
            "--output",
            str(raw / USER_DATASET),
            "--num-training",
            "5",
            "--num-test",
            "2",
            "--shape",
            "10",
            "28",
            "20",
            "--spacing",
            "3.0",
            "0.7",
            "0.9",
            "--seed",
            "4",
        ],
        check=True,
        capture_output=True,
    )
    return {**user_shell(tmp_path_factory.mktemp("home")), "nnUNet_raw": str(raw)}


def train_jobs(output: str) -> list[str]:
    """The shell command of every train job a dry run renders."""
    return re.findall(r"nnunet-core train \S+ \S+ \S+ .*$", output, re.M)


def job_resources(output: str, rule: str) -> list[str]:
    blocks = re.split(r"\n(?=(?:localrule|rule) )", output)
    return [
        match
        for block in blocks
        if block.startswith((f"rule {rule}:", f"localrule {rule}:"))
        for match in re.findall(r"^\s+resources: (.*)$", block, re.M)
    ]


def assert_upstream_schedule(output: str, gpu: int) -> None:
    jobs = train_jobs(output)
    assert len(jobs) == 10, output[-3000:]  # 2 configurations x 5 folds
    for job in jobs:
        assert "--epochs 1000 --iterations 250 --val-iterations 50" in job, job
        assert "-device auto" in job and "--num-workers" not in job, job
        assert "--save-every 10" in job, job
    resources = job_resources(output, "train")
    assert len(resources) == 10
    assert all(f"gpu={gpu}" in line for line in resources), resources


def test_every_documented_command_is_tested() -> None:
    known = {
        DEMO,
        TEST,
        GPU_INSTALL,
        OWN_DATA,
        UNLOCK,
        COPY_TEMPLATE,
        OWN_DATA_FILE,
        INSTALL_SLURM,
        SLURM,
        WORKSTATION,
        PLANNED,
        SLURM_PREVIEW,
        INSTALL_PROFILE,
        LINT,
        TEST_FAST,
        STATUS,
        PREDICT_NEW_SCANS,  # test_new_scans.py
        PREDICT_NEW_SCANS_SLURM,
        *block_starting_with(CLI_FIRST),
        *block_starting_with(DEMO_TARGETS_FIRST),
    }
    assert set(documented_commands()) == known


def test_the_gpu_install_line_gives_pip_its_options_as_arguments(checkout, user_env) -> None:
    installs = make_installs(GPU_INSTALL, checkout, user_env)
    torch_line = next(line for line in installs if "torch==" in line)
    assert shlex.split(torch_line)[1:] == [
        "install",
        "-q",
        "torch==2.13.0",
        "--index-url",
        "https://download.pytorch.org/whl/cu128",
    ]


def test_make_test_and_install_slurm_run_what_they_say(checkout, user_env) -> None:
    assert make_installs(TEST, checkout, user_env) == [], "venv out of date: run make install"
    planned = run(with_flags(TEST, "-n"), checkout, user_env).stdout.splitlines()
    recipe = "\n".join(planned)
    cluster = ".venv/bin/python -m pytest -q -m cluster --durations 25 tests/cluster >"
    assert f"{cluster}.cluster-tests.log" in recipe
    assert (
        ".venv/bin/python -m pytest -q -n 6 --dist loadfile --no-loadscope-reorder "
        '-m "not cluster" --durations 25' in recipe
    )
    assert recipe.endswith("test $rest = 0 && test $slurm = 0"), recipe  # either part fails it
    slurm = make_installs(INSTALL_SLURM, checkout, user_env)
    assert slurm[-1] == '.venv/bin/pip install -q -e ".[slurm,dev]"'


def test_make_test_fast_deselects_the_slow_and_cluster_tests(checkout, user_env) -> None:
    """The edit-test loop: pytest without the end-to-end runs and the SLURM tests."""
    assert make_installs(TEST_FAST, checkout, user_env) == [], "venv out of date: run make install"
    planned = run(with_flags(TEST_FAST, "-n"), checkout, user_env).stdout.splitlines()
    assert planned[-1] == (
        ".venv/bin/python -m pytest -q -n 6 --dist loadfile --no-loadscope-reorder "
        '-m "not slow and not cluster"'
    )


def test_install_profile_links_the_slurm_profile(checkout, user_env) -> None:
    run(INSTALL_PROFILE, checkout, user_env)
    link = Path(user_env["HOME"]) / ".config" / "snakemake" / "slurm"
    assert link.is_symlink() and link.resolve() == (checkout / "profiles" / "slurm").resolve()


@pytest.fixture(scope="module")
def planned_user_run(checkout, user_env) -> Path:
    """The own-data line as printed, with the target `preprocessed`: real data up to the plans."""
    run(with_flags(OWN_DATA, "preprocessed"), checkout, user_env)
    plans = checkout / "work" / "preprocessed" / USER_DATASET / "nnUNetPlans.json"
    assert plans.is_file()
    return checkout


def test_own_data_by_config_gets_upstreams_schedule_and_the_automatic_device(
    planned_user_run, user_env
) -> None:
    dry = run(with_flags(OWN_DATA, "-n"), planned_user_run, user_env)
    assert_upstream_schedule(dry.stdout + dry.stderr, gpu=0)
    assert "no GPU found" in dry.stderr  # the CPU warning of a long schedule


def test_own_data_by_configfile_workstation_and_slurm_lines(planned_user_run, user_env) -> None:
    run(COPY_TEMPLATE, planned_user_run, user_env)
    my = planned_user_run / "my.yaml"
    settings = yaml.safe_load(my.read_text())
    settings["dataset"]["raw_root"] = user_env["nnUNet_raw"]  # the user's edit
    my.write_text(yaml.safe_dump(settings))
    dry = run(with_flags(OWN_DATA_FILE, "-n"), planned_user_run, user_env)
    assert_upstream_schedule(dry.stdout + dry.stderr, gpu=0)
    workstation = run(with_flags(WORKSTATION, "-n"), planned_user_run, user_env)
    assert_upstream_schedule(workstation.stdout + workstation.stderr, gpu=1)
    pytest.importorskip("snakemake_executor_plugin_slurm")
    slurm = run(with_flags(SLURM, "-n"), planned_user_run, user_env)
    output = slurm.stdout + slurm.stderr
    assert_upstream_schedule(output, gpu=1)
    assert all("slurm_partition=gpu" in line for line in job_resources(output, "train"))


def test_a_cluster_preview_lists_the_fold_jobs_once_planned(tmp_path, user_env) -> None:
    """The README's preview (issue 36): on a fresh work_dir the SLURM dry run lists no training
    job (the plans, a checkpoint, decide them); after the `planned` line it lists every fold job,
    with its SLURM resources and no LSF key."""
    pytest.importorskip("snakemake_executor_plugin_slurm")
    checkout = mirror_checkout(tmp_path / "checkout")
    run(COPY_TEMPLATE, checkout, user_env)
    my = checkout / "my.yaml"
    settings = yaml.safe_load(my.read_text())
    settings["dataset"]["raw_root"] = user_env["nnUNet_raw"]  # the user's edit
    my.write_text(yaml.safe_dump(settings))
    fresh = run(SLURM_PREVIEW, checkout, user_env)
    assert train_jobs(fresh.stdout + fresh.stderr) == []
    run(PLANNED, checkout, user_env)
    pre = checkout / "work" / "preprocessed" / USER_DATASET
    assert (pre / "nnUNetPlans.json").is_file() and (pre / "splits_final.json").is_file()
    assert not list(pre.glob("nnUNetPlans_*")), "planned preprocessed data"
    preview = run(SLURM_PREVIEW, checkout, user_env)
    output = preview.stdout + preview.stderr
    assert_upstream_schedule(output, gpu=1)
    assert all("slurm_partition=gpu" in line for line in job_resources(output, "train"))
    assert "lsf_extra" not in output and "lsf_" not in output


def kill_when_training_starts(command: str, cwd: Path, env: dict[str, str]) -> None:
    """``command`` started as a user would, then SIGKILLed with all its jobs (its process group)
    as soon as a fold job has written to its log: a killed Snakemake keeps its lock."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    try:
        while not any(p.stat().st_size for p in (cwd / "work").rglob("train_*_fold*.log")):
            assert process.poll() is None, "the run ended before any fold job started"
            assert time.monotonic() < deadline, "no fold job started within 10 min"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_own_data_killed_then_unlocked_runs_to_the_report(planned_user_run, user_env) -> None:
    """The README's advice after a kill: the same command is refused (lock), the unlock line as
    printed, then the same command again completes."""
    command = f"{OWN_DATA} {TINY_SCHEDULE}"
    kill_when_training_starts(command, planned_user_run, user_env)
    refused = run(command, planned_user_run, user_env, check=False)
    assert refused.returncode != 0 and "cannot be locked" in refused.stderr, refused.stderr[-2000:]
    run(UNLOCK, planned_user_run, user_env)
    run(command, planned_user_run, user_env)
    results = planned_user_run / "work" / "results" / USER_DATASET
    assert (results / "report" / "report.md").is_file()
    assert (results / "inference_information.json").is_file()
    final = planned_user_run / "work" / "predictions" / USER_DATASET / "final"
    assert sorted(p.name for p in final.glob("*.nii.gz")) == [
        "synth_t000.nii.gz",
        "synth_t001.nii.gz",
    ]


def test_make_lint_is_clean(checkout, user_env) -> None:
    planned = run(with_flags(LINT, "-n"), checkout, user_env).stdout.splitlines()
    installs = [line for line in planned if "pip install" in line]
    # an out-of-date venv would be reinstalled from this throwaway checkout, under the suite
    assert [line for line in installs if ".[docs" not in line] == [], "venv out of date"
    # the site's strict build is a step of make lint; tests/unit/test_docs_site.py runs it, so
    # here it is left out (MKDOCS=:), and the docs tools' stamp is not remade (-o)
    assert any("mkdocs build --strict" in line for line in planned), planned
    lint = with_flags(LINT, "-o", ".venv/.installed-docs", "MKDOCS=:")
    result = run(lint, checkout, user_env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr  # snakefmt --check included
    # the one deliberate lint (no conda env per rule) is there and is the only kind
    assert re.search(r"snakemake --lint: clean \(([1-9]\d*) rules without", result.stdout), (
        result.stdout
    )
