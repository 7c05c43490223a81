"""The SLURM profile asks for the stop signal the trainer reacts to: one setting, both places.

Real Snakemake with the real profile (profiles/slurm) in dry-run mode (no cluster needed, the
SLURM executor plugin is): the dataset is planned first so that the train jobs, and so their
resources, appear in the dry run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers.workflow import REPO, copy_prepared, snakemake, tiny_config

pytest.importorskip(
    "snakemake_executor_plugin_slurm", reason="SLURM plugin missing: make install-slurm"
)

pytestmark = pytest.mark.slow  # four workflow runs, about 10 s each

PROFILE = str(REPO / "profiles" / "slurm")


def user_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NNUNET_STOP_SIGNAL"}
    return {**env, **settings}


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path) -> tuple[Path, dict]:
    """A planned dataset (a copy of the prepared work_dir; its plans hold both configurations),
    so that dry runs list the train jobs of the tests' demo config."""
    workdir = tmp_path_factory.mktemp("planned")
    return workdir, tiny_config(copy_prepared(prepared_work, workdir / "work"))


def train_slurm_extras(output: str) -> list[str]:
    """The ``slurm_extra`` resource of every train job of a dry run."""
    extras = []
    for block in output.split("\nrule ")[1:]:
        if block.startswith("train:"):
            extras += re.findall(r"slurm_extra=(\S+?)(?:,|$)", block, re.MULTILINE)
    return extras


@pytest.mark.parametrize(("setting", "expected"), [(None, "USR1"), ("USR2", "USR2")])
def test_train_jobs_ask_slurm_for_the_configured_signal(planned, setting, expected) -> None:
    workdir, config = planned
    env = user_env() if setting is None else user_env(NNUNET_STOP_SIGNAL=setting)
    result = snakemake(workdir, config, "--profile", PROFILE, "-n", env=env)
    extras = train_slurm_extras(result.stdout)
    assert len(extras) == 10  # 2 configurations x 5 folds
    assert set(extras) == {f"--signal={expected}@600"}


def test_an_unknown_signal_setting_stops_the_workflow_with_one_line(planned) -> None:
    workdir, config = planned
    env = user_env(NNUNET_STOP_SIGNAL="TERM")
    result = snakemake(workdir, config, "--profile", PROFILE, "-n", env=env, check=False)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "NNUNET_STOP_SIGNAL='TERM': the stop signal must be one of USR1, USR2" in output
