"""Running the real Snakemake workflow from tests: a tiny config, the CLI call, the job table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# the scenarios' one reader (the benchmarks may not import the tests), re-exported for the tests
from benchmarks.faults.scenario import SCENARIOS, SCHEMA, scenario_config  # noqa: F401
from tests.helpers.paths import REPO

DATASET = "Dataset900_Synth"


def tiny_config(work: Path, **dataset_overrides) -> dict:
    """The scenario ``demo`` (config/demo.yaml on 6 + 2 cases of 12 x 32 x 32), every key given,
    writing into ``work``; ``dataset_overrides`` replace keys of ``dataset``."""
    config = scenario_config("demo")
    config["work_dir"] = str(work)
    config["dataset"].update(dataset_overrides)
    return config


def prepared_config(work: Path) -> dict:
    """``tiny_config`` planning 3d_fullres alone: the config the shared prepared work_dir
    (tests/conftest.py ``prepared_work``) was made with, before a test's own training keys."""
    config = tiny_config(work)
    config["planning"]["configurations"] = ["3d_fullres"]
    return config


def copy_prepared(prepared_work: Path, work: Path) -> Path:
    """A copy of a prepared work_dir (synthetic data, integrity record, fingerprint, plans,
    splits, preprocessed data) at ``work``, file times kept. A run of ``prepared_config(work)``
    there starts at training: Snakemake judges outputs without its metadata (none is copied) by
    their times alone, and none is older than its inputs."""
    shutil.copytree(prepared_work, work, symlinks=True)
    return work


def snakemake_command(workdir: Path, config: dict, *extra: str) -> list[str]:
    """The real snakemake CLI of this interpreter's environment on the repo's Snakefile, with
    ``config`` written to ``workdir/config.yaml``."""
    config_file = workdir / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    return [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_file),
        "--cores",
        "2",
        *extra,
    ]


def start_snakemake(workdir: Path, config: dict, *extra: str) -> subprocess.Popen:
    """``snakemake_command`` started, its output (stdout and stderr) in one text pipe."""
    return subprocess.Popen(
        snakemake_command(workdir, config, *extra),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def snakemake(
    workdir: Path, config: dict, *extra: str, check: bool = True, env: dict | None = None
):
    """Run the real snakemake CLI of this interpreter's environment on the repo's Snakefile."""
    command = snakemake_command(workdir, config, *extra)
    result = subprocess.run(command, capture_output=True, text=True, cwd=workdir, env=env)
    if check and result.returncode != 0:
        pytest.fail(f"snakemake failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return with_shell_commands(result)


_COMPLETE_LOG = re.compile(r"^Complete log\(s\): (\S+)$", re.M)


def logged_shell_commands(output: str) -> list[str]:
    """The "Shell command:" lines of the Snakemake log that a run's ``output`` names at its end
    ("Complete log(s): ..."): a live run's console shows one line per job
    (nnunet_core.workflow.console)."""
    match = _COMPLETE_LOG.search(output)
    if match is None or not Path(match.group(1)).is_file():
        return []
    lines = Path(match.group(1)).read_text().splitlines()
    return [line for line in lines if line.startswith("Shell command: ")]


def with_shell_commands(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """``result`` with its run's shell commands appended to ``stdout`` (only those: the job
    counts stay the console's), for the tests that read what a job ran."""
    commands = logged_shell_commands(result.stdout + result.stderr)
    result.stdout += "".join(f"{line}\n" for line in commands)
    return result


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule: those that finished in a real run, else the dry run's 'Job stats' table.

    (A real run prints the table before checkpoints add jobs, so it is counted from the
    "Finished jobid: N (Rule: X)" lines instead.)
    """
    counts: dict[str, int] = {}
    for rule in re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", output):
        counts[rule] = counts.get(rule, 0) + 1
    if counts:
        return counts
    for block in output.split("Job stats:")[1:]:
        for line in block.splitlines()[3:]:
            match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
            if not match:
                break
            if match.group(1) != "total":
                counts[match.group(1)] = int(match.group(2))
    return counts


def processes() -> dict[int, tuple[int, list[str]]]:
    """pid -> (parent pid, argv) of every process we can read (Linux: /proc)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        table[int(entry.name)] = (ppid, [a.decode() for a in argv if a])
    return table


def command_below(root: int, matches) -> int | None:
    """The pid of an ``nnunet-core`` process below ``root`` whose argv ``matches(argv)``."""
    table = processes()
    for pid, (_, argv) in table.items():
        if "nnunet-core" in " ".join(argv[:2]) and matches(argv):
            ancestor = pid
            while ancestor > 1 and ancestor != root:
                ancestor = table.get(ancestor, (1, []))[0]
            if ancestor == root:
                return pid
    return None


def trainer_of_fold(dataset: str, fold: str, root: int) -> int | None:
    """The pid of ``nnunet-core train <dataset> <configuration> <fold>`` below ``root``."""

    def matches(argv: list[str]) -> bool:
        if "train" not in argv or dataset not in argv:
            return False
        i = argv.index(dataset)
        return argv[i + 2 : i + 3] == [fold]

    return command_below(root, matches)


class ReaderCheckout:
    """What a reader has: a fresh clone of the committed code (not this working tree) in
    ``root``, whose ``nnunet-core reproduce`` unpacks and checks an archive; ``env`` runs the
    clone's code (its package first on PYTHONPATH)."""

    def __init__(self, folder: Path) -> None:
        self.root = folder / "checkout"
        subprocess.run(["git", "clone", "-q", str(REPO), str(self.root)], check=True)
        self.env = {**os.environ, "PYTHONPATH": str(self.root)}
        self.reproduce = [sys.executable, "-m", "nnunet_core", "reproduce"]

    def unpack(self, archive: Path, into: Path) -> None:
        command = [*self.reproduce, "unpack", str(archive), "--into", str(into)]
        subprocess.run(command, check=True, env=self.env)

    def check(self, archive: Path, work: Path) -> subprocess.CompletedProcess:
        command = [*self.reproduce, "check", str(archive), str(work)]
        return subprocess.run(command, capture_output=True, text=True, env=self.env)


def predict_workflow(work: Path, predict: dict, *extra: str) -> subprocess.CompletedProcess:
    """``snakemake --cores 2 --config predict={...}`` (segmenting new scans) as a user types it,
    run in ``work`` with ``work/work`` as its work_dir."""
    value = "{" + ", ".join(f"{k}: {v}" for k, v in predict.items()) + "}"
    command = [str(Path(sys.executable).parent / "snakemake"), "-s", str(REPO / "Snakefile"),
               "--cores", "2", "--config", f"predict={value}", f"work_dir={work / 'work'}",
               *extra]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=False)
