"""Running the real Snakemake workflow from tests: a tiny config, the CLI call, the job table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config, validate

from tests.helpers.paths import REPO

DATASET = "Dataset900_Synth"
SCENARIOS = REPO / ".test"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def scenario_config(*names: str) -> dict:
    """The config of the scenarios ``names`` (``.test/<name>/config.yaml``), each file updating
    the ones before as ``--configfile a b`` does, with the schema's defaults filled in (as the
    workflow's own validation does)."""
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((SCENARIOS / name / "config.yaml").read_text()))
    validate(config, str(SCHEMA), set_default=True)
    return config


def tiny_config(work: Path, **dataset_overrides) -> dict:
    """The scenario ``demo`` (config/demo.yaml on 6 + 2 cases of 12 x 32 x 32), every key given,
    writing into ``work``; ``dataset_overrides`` replace keys of ``dataset``."""
    config = scenario_config("demo")
    config["work_dir"] = str(work)
    config["dataset"].update(dataset_overrides)
    return config


def snakemake(
    workdir: Path, config: dict, *extra: str, check: bool = True, env: dict | None = None
):
    """Run the real snakemake CLI of this interpreter's environment on the repo's Snakefile."""
    config_file = workdir / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    command = [
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
