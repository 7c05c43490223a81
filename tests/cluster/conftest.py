"""Shared pieces of the SLURM tests (tests/cluster/start_cluster.sh starts a test cluster).

Fixtures (helpers live on the ``cluster`` object: conftest modules are not imported by name):

* (autouse) every test here skips with the reason when no SLURM answers (``sinfo`` missing or
  failing) or the Snakemake SLURM executor plugin is missing; NNUNET_REQUIRE_CLUSTER=1 (CI)
  makes that a failure.
* ``cluster``: a ``Cluster``: the test profile builder, the jobs of a run (``squeue``),
  ``scontrol`` fields, the plugin's per-job logs, ``wait_for`` and ``start`` (snakemake in the
  background), the prepared dataset's copy and paths.
* ``slurm_test_profile``: the profile builder alone (``Cluster.profile``).
* ``prepared_workdir``: a run folder holding the suite's shared prepared work_dir
  (tests/conftest.py ``prepared_work``: a local run made its ``preprocessed`` target) as
  ``work``; ``Cluster.copy_prepared`` gives a test its copy, so that the signal tests submit
  nothing but training jobs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.workflow import DATASET, REPO, copy_prepared, prepared_config

PROFILE = REPO / "profiles" / "slurm" / "profile.yaml"
# Relative work_dir: a copy of a run folder keeps its paths, params and Snakemake metadata.
WORK = "work"
CONFIGURATION = "3d_fullres"  # the one prepared_config plans
ENDED = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
}


# ----------------------------------------------------------------------------- skips
def slurm_problem() -> str | None:
    """Why no SLURM can be used here, or None."""
    if shutil.which("sinfo") is None:
        return "no SLURM here: `sinfo` not found (start one: sudo tests/cluster/start_cluster.sh)"
    try:
        result = subprocess.run(["sinfo", "-h"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "no SLURM reachable: `sinfo` did not answer within 20 s"
    if result.returncode != 0:
        return f"no SLURM reachable: `sinfo` failed: {result.stderr.strip()}"
    return None


def plugin_problem() -> str | None:
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
        import snakemake_executor_plugin_slurm_jobstep  # noqa: F401
    except ImportError:
        return "SLURM executor plugin missing: pip install -e '.[slurm]'"
    return None


# ----------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class SlurmJob:
    id: str
    state: str
    # The plugin's comment: rule_<rule>_wildcards_<wildcard values joined by "_">.
    comment: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def wildcard_part(*wildcards: object) -> str:
    """The plugin's rendering of a job's wildcard values (its comment and log folder)."""
    return "_".join(str(w) for w in wildcards)


class SnakemakeRun:
    """``snakemake`` of this environment on the repo's Snakefile, started in the background.

    It runs under ``timeout -s INT`` (Snakemake cancels its SLURM jobs on SIGINT), and
    ``wait`` kills it for good 90 s after that. Output (stdout and stderr) goes to
    ``workdir/snakemake.out``.
    """

    def __init__(self, workdir: Path, config: dict, *extra: str, timeout: float) -> None:
        self.workdir = workdir
        self.timeout = timeout
        self.output_file = workdir / "snakemake.out"
        config_file = workdir / "config.yaml"
        config_file.write_text(yaml.safe_dump(config))
        command = [
            *("timeout", "-s", "INT", "-k", "60", str(int(timeout))),
            str(Path(sys.executable).parent / "snakemake"),
            *("--snakefile", str(REPO / "Snakefile")),
            *("--directory", str(workdir)),
            *("--configfile", str(config_file)),
            *extra,
        ]
        self.started = time.monotonic()
        with open(self.output_file, "w") as handle:
            self.process = subprocess.Popen(
                command, stdout=handle, stderr=subprocess.STDOUT, cwd=workdir
            )
        self.returncode: int | None = None
        self.seconds: float | None = None  # from the start to the end first seen

    def alive(self) -> bool:
        if self.process.poll() is None:
            return True
        if self.seconds is None:
            self.seconds = time.monotonic() - self.started
        return False

    @property
    def output(self) -> str:
        return self.output_file.read_text(errors="replace")

    def tail(self, chars: int = 6000) -> str:
        return self.output[-chars:]

    def wait(self) -> int:
        left = self.timeout + 90 - (time.monotonic() - self.started)
        try:
            self.returncode = self.process.wait(timeout=max(left, 1))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.returncode = self.process.wait()
        self.alive()  # notes the end
        return self.returncode

    def stop(self) -> None:
        """Interrupt snakemake if it still runs (it cancels its jobs)."""
        if self.alive():
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Cluster:
    """Helpers for tests against the running SLURM test cluster."""

    configuration = CONFIGURATION
    dataset = DATASET

    # ------------------------------------------------------------------- profile
    @staticmethod
    def profile(folder: Path, **overrides: Any) -> Path:
        """profiles/slurm plus what the test cluster needs (no slurmdbd: squeue; partition
        debug; no account; small memory), in ``folder/profile``.

        ``overrides`` are more top-level keys, except ``set_resources``: {rule: {key: value}},
        merged into the profile's per-rule resources.
        """
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
        for rule, resources in overrides.pop("set_resources", {}).items():
            profile["set-resources"].setdefault(rule, {}).update(resources)
        profile.update(overrides)
        target = folder / "profile"
        target.mkdir(parents=True)
        (target / "profile.yaml").write_text(yaml.safe_dump(profile))
        return target

    # ------------------------------------------------------------------- jobs
    @staticmethod
    def jobs(workdir: Path) -> list[SlurmJob]:
        """Every job submitted from ``workdir`` that squeue still knows, oldest first
        (the test cluster's MinJobAge of 3600 s keeps ended jobs visible)."""
        result = subprocess.run(
            ["squeue", "--states=all", "-h", "-o", "%i|%T|%k|%Z"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        jobs, folder = [], Path(workdir).resolve()
        for line in result.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 4 and Path(parts[3]).resolve() == folder:
                jobs.append(SlurmJob(*parts[:3]))
        return sorted(jobs, key=lambda job: int(job.id))

    def jobs_of(self, workdir: Path, rule: str, *wildcards: object) -> list[SlurmJob]:
        """The jobs of one rule and wildcard values, e.g. ``("train", "3d_fullres", 0)``."""
        comment = f"rule_{rule}_wildcards_{wildcard_part(*wildcards)}"
        return [job for job in self.jobs(workdir) if job.comment == comment]

    def running_job(self, workdir: Path, rule: str, *wildcards: object) -> SlurmJob | None:
        running = [j for j in self.jobs_of(workdir, rule, *wildcards) if j.state == "RUNNING"]
        return running[-1] if running else None

    def table(self, workdir: Path) -> str:
        return "\n".join(f"{j.id} {j.state} {j.comment}" for j in self.jobs(workdir))

    @staticmethod
    def fields(job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (JobState, ExitCode, RunTime, TimeLimit, ...)."""
        output = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30
        ).stdout
        return dict(f.split("=", 1) for f in output.split() if "=" in f and f[:1].isupper())

    @staticmethod
    def seconds(slurm_time: str) -> int:
        """SLURM's ``[days-]hours:minutes:seconds`` (or ``minutes:seconds``) in seconds."""
        days, _, clock = slurm_time.rpartition("-")
        total = 0
        for part in clock.split(":"):
            total = total * 60 + int(part)
        return total + int(days or 0) * 86400

    @staticmethod
    def scancel(*args: str) -> None:
        subprocess.run(["scancel", *args], check=True, timeout=30)

    @staticmethod
    def slurm_log(workdir: Path, rule: str, job: SlurmJob, *wildcards: object) -> Path:
        """The plugin's log of one job (the test profile keeps those of successful jobs too)."""
        folder = workdir / ".snakemake" / "slurm_logs" / f"rule_{rule}" / wildcard_part(*wildcards)
        return folder / f"{job.id}.log"

    def cancel_leftovers(self, workdir: Path) -> None:
        left = [job.id for job in self.jobs(workdir) if not job.ended]
        if left:
            subprocess.run(["scancel", *left], check=False, timeout=30)

    # ------------------------------------------------------------------- waiting, running
    @staticmethod
    def wait_for(
        condition: Callable[[], Any],
        timeout: float,
        what: str,
        *,
        interval: float = 0.5,
        alive: Callable[[], bool] | None = None,
        details: Callable[[], str] | None = None,
    ) -> Any:
        """Poll ``condition()`` until it returns something truthy, and return that. Fails after
        ``timeout`` seconds, or at once when ``alive()`` turns False (the run ended)."""
        end = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            ended = alive is not None and not alive()
            if ended or time.monotonic() > end:
                why = "the run ended" if ended else f"{timeout:g} s passed"
                extra = f"\n{details()}" if details else ""
                pytest.fail(f"waited for {what}, but {why}{extra}")
            time.sleep(interval)

    @staticmethod
    def start(workdir: Path, config: dict, *extra: str, timeout: float) -> SnakemakeRun:
        return SnakemakeRun(workdir, config, *extra, timeout=timeout)

    # ------------------------------------------------------------------- the prepared dataset
    @staticmethod
    def tiny_config() -> dict:
        """The prepared tests' config (3d_fullres) with work_dir ``work``, relative to the run
        folder."""
        return prepared_config(Path(WORK))

    @staticmethod
    def copy_prepared(prepared: Path, target: Path) -> Path:
        """A run folder ``target`` whose ``work`` is a copy of the prepared run folder's
        (``tests.helpers.workflow.copy_prepared``: file times kept, so nothing looks outdated)."""
        copy_prepared(prepared / WORK, target / WORK)
        return target

    @staticmethod
    def fold_dir(workdir: Path, fold: int, trainer: str) -> Path:
        """The fold's results folder; ``trainer`` is the class name."""
        model = f"{trainer}__nnUNetPlans__{CONFIGURATION}"
        return workdir / WORK / "results" / DATASET / model / f"fold_{fold}"

    @staticmethod
    def train_log(workdir: Path, fold: int) -> Path:
        """The train rule's log of a fold (Snakemake deletes it before every attempt)."""
        return workdir / WORK / "logs" / DATASET / f"train_{CONFIGURATION}_fold{fold}.log"

    @staticmethod
    def read(path: Path) -> str:
        """A text file's content, "" when it does not exist (yet)."""
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def training_targets(self, workdir: Path, folds: list[int], trainer: str) -> list[str]:
        targets = []
        for fold in folds:
            folder = self.fold_dir(workdir, fold, trainer).relative_to(workdir)
            targets.append(f"{folder}/validation/summary.json")  # written after the final
        return targets


@pytest.fixture(scope="session", autouse=True)
def _slurm_and_plugin() -> None:
    """Every test here needs a SLURM cluster that answers and the Snakemake SLURM plugin: they
    skip with the reason, or fail with it under NNUNET_REQUIRE_CLUSTER=1 (CI)."""
    problem = slurm_problem() or plugin_problem()
    if problem:
        if os.environ.get("NNUNET_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"NNUNET_REQUIRE_CLUSTER=1, but {problem}", pytrace=False)
        pytest.skip(problem)


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The helpers for tests against the SLURM test cluster."""
    return Cluster()


@pytest.fixture(scope="session")
def slurm_test_profile() -> Callable[[Path], Path]:
    """``slurm_test_profile(folder)``: profiles/slurm adapted to the test cluster, written to
    ``folder/profile`` (returned); see ``Cluster.profile``."""
    return Cluster.profile


@pytest.fixture(scope="session")
def prepared_workdir(prepared_work: Path) -> Path:
    """A run folder whose ``work`` is the suite's prepared work_dir of ``prepared_config``
    (``Cluster.tiny_config`` with a relative work_dir): synthetic dataset, plans, splits,
    preprocessed data. Read-only: ``Cluster.copy_prepared`` it."""
    return prepared_work.parent
