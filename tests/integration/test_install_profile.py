"""`make install-profile`: afterwards `snakemake --profile slurm` finds profiles/slurm by name."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers.workflow import REPO, job_counts, snakemake, tiny_config


def _make_install_profile(home) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    return subprocess.run(
        ["make", "-s", "-C", str(REPO), "install-profile"],
        env={**env, "HOME": str(home)},
        capture_output=True,
        text=True,
    )


def test_profile_is_linked_into_the_user_profile_folder(tmp_path) -> None:
    result = _make_install_profile(tmp_path)
    assert result.returncode == 0, result.stderr
    link = tmp_path / ".config" / "snakemake" / "slurm"
    assert link.is_symlink() and link.resolve() == (REPO / "profiles" / "slurm").resolve()
    assert _make_install_profile(tmp_path).returncode == 0  # again: same link, no error


def test_an_existing_profile_of_that_name_is_not_replaced(tmp_path) -> None:
    mine = tmp_path / ".config" / "snakemake" / "slurm"
    mine.mkdir(parents=True)
    (mine / "profile.yaml").write_text("executor: slurm\n")
    result = _make_install_profile(tmp_path)
    assert result.returncode != 0
    assert "exists and is not a link" in result.stderr
    assert (mine / "profile.yaml").read_text() == "executor: slurm\n"


def test_snakemake_profile_slurm_works_by_name(tmp_path) -> None:
    pytest.importorskip(
        "snakemake_executor_plugin_slurm", reason="SLURM plugin missing: make install-slurm"
    )
    home = tmp_path / "home"
    assert _make_install_profile(home).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "XDG_CONFIG_HOME"}
    config = tiny_config(tmp_path / "work")
    result = snakemake(tmp_path, config, "--profile", "slurm", "-n", env={**env, "HOME": str(home)})
    assert "Using profiles slurm and workflow specific profile" in result.stderr
    assert "slurm_partition=cpu" in result.stdout  # the profile's default-resources applied
    assert job_counts(result.stdout)["synthesize_dataset"] == 1
