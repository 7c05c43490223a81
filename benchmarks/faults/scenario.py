"""The workflow's ``demo`` scenario (``.test/demo/config.yaml``) as the campaign runs it.

Read here, not from the test helpers, so that the benchmark depends on the repository's files
only; the schema fills in every default as the workflow's own validation does.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO / ".test" / "demo" / "config.yaml"
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def demo_config(work: Path) -> dict:
    """The scenario ``demo`` (6 + 2 cases of 12 x 32 x 32), every key given, writing into
    ``work``."""
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    validate(config, str(SCHEMA), set_default=True)
    config["work_dir"] = str(work)
    return config
