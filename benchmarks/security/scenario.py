"""The workflow's scenario ``demo`` (``.test/demo/config.yaml``) with every key given, as a run
sees it: read here from the repository's files (a family imports only itself and common/), with
the schema's defaults filled in as the workflow's own validation does."""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


def demo_config() -> dict:
    config = yaml.safe_load((REPO / ".test" / "demo" / "config.yaml").read_text())
    validate(config, str(SCHEMA), set_default=True)
    return config
