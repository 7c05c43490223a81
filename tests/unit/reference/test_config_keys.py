"""The configuration reference lists every key of the schema, nested ones included, each with
the schema's description (its one home) and default."""

from __future__ import annotations

import re
from typing import Any

import yaml

from nnunet_core.reference.config_keys import config_reference
from tests.helpers.paths import REPO

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]*) \|", re.MULTILINE)


def keys_of(node: dict[str, Any], prefix: str = "") -> set[str]:
    """Every key the schema spells: properties, list items (``[]``), free names (``<name>``)."""
    found = set()
    for name, child in node.get("properties", {}).items():
        found.add(prefix + name)
        found |= keys_of(child, f"{prefix}{name}.")
        items = child.get("items")
        if isinstance(items, dict):
            found |= keys_of(items, f"{prefix}{name}[].")
        free = child.get("additionalProperties")
        if isinstance(free, dict):
            found |= keys_of(free, f"{prefix}{name}.<name>.")
    return found


def rows() -> dict[str, str]:
    return dict(ROW.findall(config_reference(SCHEMA)))


def test_the_reference_lists_exactly_the_schemas_keys() -> None:
    expected = keys_of(SCHEMA)
    assert {"training.pretrained_weights.checkpoint", "methods[].baseline", "seed"} <= expected
    assert {"planning.overrides.<name>.inherits_from", "datasets[].synthetic"} <= expected
    listed = list(rows())
    assert len(listed) == len(set(listed))  # each once
    assert set(listed) == expected


def test_every_key_has_a_description_and_the_schemas_default() -> None:
    page = config_reference(SCHEMA)
    assert "training.epochs` | `1000` | integer (>= 1, <= 100000) | Epochs per fold" in page
    assert "| `dataset.id` | (required) |" in page
    assert "| `training.folds` | `[0, 1, 2, 3, 4]` |" in page
    undescribed = [line for line in page.splitlines() if line.startswith("| `") and "|  |" in line]
    assert undescribed == []
