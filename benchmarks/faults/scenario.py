"""The workflow's scenarios (``.test/<name>/config.yaml``) with every key given, as a run sees them.

Read here, not from the test helpers, so that the benchmark depends on the repository's files
only; the test helpers read them through this module (tests/helpers/workflow.py). The schema
fills in every default as the workflow's own validation does.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.utils import update_config, validate

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / ".test"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def scenario_config(*names: str) -> dict:
    """The scenarios ``names``, each updating the ones before as ``--configfile a b`` does,
    with the schema's defaults filled in."""
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((SCENARIOS / name / "config.yaml").read_text()))
    validate(config, str(SCHEMA), set_default=True)
    return config
