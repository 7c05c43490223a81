"""The workflow's checks that need no run of their own: the dry run shows the DAG (and writes
nothing), and an unknown config key is one clear line.

What a real run up to the stage target ``preprocessed`` leaves (the preprocessed data, nothing to
do again, touching one raw image reruns only its dependants, a broken dataset stops at the
integrity check) is checked on the whole tiny run of test_workflow_pipeline.py; ``snakefmt`` and
``snakemake --lint`` are checked by ``make lint`` in test_readme_commands.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.workflow import job_counts, tiny_config
from tests.helpers.workflow import snakemake as snakemake_target

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, config: dict, *extra: str, check: bool = True):
    """The workflow up to the stage target `preprocessed` (what these tests cover)."""
    return snakemake_target(workdir, config, "preprocessed", *extra, check=check)


def test_dry_run_prints_the_dag(tmp_path) -> None:
    result = snakemake(tmp_path, tiny_config(tmp_path / "work"), "-n")
    counts = job_counts(result.stdout + result.stderr)
    for rule in ("synthesize_dataset", "verify_dataset", "fingerprint", "plan", "splits"):
        assert counts.get(rule) == 1, counts
    assert not (tmp_path / "work").exists(), "a dry run must not write anything"


def test_unknown_config_key_is_one_clear_line(tmp_path) -> None:
    config = tiny_config(tmp_path / "work")
    config["planning"]["bogus_key"] = 3
    result = snakemake(tmp_path, config, "-n", check=False)
    assert result.returncode != 0
    assert "planning.bogus_key: unknown key" in result.stdout + result.stderr
