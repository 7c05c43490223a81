"""Plans files: loading, configuration inheritance (``inherits_from``) and lookups.

A child configuration is its parent's dict updated with the child's keys (a shallow update, as
upstream does), so a plans file written here reads the same in upstream nnU-Net.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import read_json

INHERITS_KEY = "inherits_from"


def load_plans(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        msg = f"{path}: plans file not found (run `nnunet-core plan` first)"
        raise ConfigurationError(msg)
    return read_json(path)


def configuration_names(plans: dict[str, Any]) -> list[str]:
    """Names of every configuration in the plans, in file order."""
    return list(plans["configurations"])


def resolve_configuration(plans: dict[str, Any], name: str) -> dict[str, Any]:
    """The full configuration dict of ``name`` with inheritance applied (cycles are errors)."""
    configurations = plans["configurations"]
    chain: list[str] = []
    current = name
    while True:
        if current not in configurations:
            available = ", ".join(configurations)
            msg = (
                f"configuration {current!r} not in plans {plans.get('plans_name', '')} (available: "
                f"{available})"
            )
            raise ConfigurationError(msg)
        if current in chain:
            msg = f"configuration inheritance cycle: {' -> '.join([*chain, current])}"
            raise ConfigurationError(msg)
        chain.append(current)
        parent = configurations[current].get(INHERITS_KEY)
        if parent is None:
            break
        current = parent
    resolved: dict[str, Any] = {}
    for link in reversed(chain):
        resolved.update(copy.deepcopy(configurations[link]))
    resolved.pop(INHERITS_KEY, None)
    return resolved


def is_trainable(plans: dict[str, Any], name: str) -> bool:
    """A configuration that has its own data (cascade stages need a previous stage first)."""
    return "previous_stage" not in resolve_configuration(plans, name)
