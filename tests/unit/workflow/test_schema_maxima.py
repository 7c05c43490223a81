"""Every number of the workflow config has an upper bound (issue 51: ``epochs: 10**30`` and
``splits.num_folds: 10**12`` passed), the training ones equal ``nnunet-core train``'s, and the
docs' configuration reference (generated from the schema) shows each bound on its key's row."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import yaml

from nnunet_core.reference.config_keys import config_reference
from nnunet_core.training import limits
from nnunet_core.workflow.config import schema_errors
from tests.helpers.paths import REPO

SCHEMA_FILE = REPO / "workflow" / "schemas" / "config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_FILE.read_text())
NUMBER_TYPES = {"integer", "number"}
# bounded by a check beyond the schema: each fold below the fold count (check_folds), one line
EXEMPT = {"training.folds"}


def _subschemas(schema: dict[str, Any], key: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(dotted key, schema)`` of ``schema`` and every schema below it; array entries, map
    values and alternatives count as their key."""
    yield key, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _subschemas(sub, f"{key}.{name}" if key else name)
    below = [schema.get("items"), schema.get("additionalProperties"), *schema.get("oneOf", [])]
    for sub in below:
        if isinstance(sub, dict):
            yield from _subschemas(sub, key)


def _numeric(schema: dict[str, Any]) -> bool:
    declared = schema.get("type", [])
    return bool(NUMBER_TYPES & ({declared} if isinstance(declared, str) else set(declared)))


def schema_maxima() -> dict[str, int]:
    return {key: s["maximum"] for key, s in _subschemas(SCHEMA, "") if "maximum" in s}


def test_every_number_in_the_schema_has_a_maximum() -> None:
    unbounded = [
        key
        for key, s in _subschemas(SCHEMA, "")
        if _numeric(s) and "maximum" not in s and key not in EXEMPT
    ]
    assert unbounded == []


def test_the_training_maxima_are_the_train_commands() -> None:
    maxima = schema_maxima()
    assert maxima["training.epochs"] == limits.MAX_EPOCHS
    assert maxima["training.save_every"] == limits.MAX_EPOCHS
    assert maxima["training.iterations_per_epoch"] == limits.MAX_ITERATIONS
    assert maxima["training.val_iterations_per_epoch"] == limits.MAX_ITERATIONS
    assert maxima["training.num_workers"] == limits.MAX_WORKERS
    assert maxima["training.gpus_per_job"] == limits.MAX_GPUS
    assert maxima["training.stop_margin"] == limits.MAX_STOP_MARGIN
    for key in ("seed", "seeds", "splits.seed", "dataset.synthetic.seed"):
        assert maxima[key] == limits.MAX_SEED, key


def test_the_configuration_reference_shows_each_maximum_as_the_schema_has_it() -> None:
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \|(.*)$", config_reference(SCHEMA), re.MULTILINE))
    shown = {key: int(n) for key, row in rows.items() for n in re.findall(r"<= ([0-9]+)", row)[:1]}
    assert shown == schema_maxima()


def test_the_bounds_themselves_are_accepted_and_one_more_is_not() -> None:
    at = {"work_dir": "w", "dataset": {"id": 1, "name": "X"}, "training": {"epochs": 100000}}
    assert schema_errors(at, SCHEMA_FILE) == []
    at["training"]["epochs"] = 100001
    assert schema_errors(at, SCHEMA_FILE) == [
        "training.epochs: 100001 is greater than the maximum of 100000"
    ]
