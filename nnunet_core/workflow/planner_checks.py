"""The planners a config names, checked before any job: each one found and a ``Planner``, and
no two planners of a dataset writing the same plans file.

A user's planner is imported here, at parse time (``planning.user_planner``): its plans name
names the files of the plan, preprocess and train rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.user_planner import resolve_planner


def named_planners(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(config key, planner name) of every planner the config names."""
    named = [("planning.planner", config.get("planning", {}).get("planner"))]
    for i, entry in enumerate(config.get("datasets") or []):
        planner = entry.get("planning", {}).get("planner")
        named.append((f"datasets[{i}].planning.planner", planner))
    for i, entry in enumerate(config.get("methods") or []):
        named.append((f"methods[{i}].planner", entry.get("planner")))
    return [(key, name) for key, name in named if isinstance(name, str)]


def check_planners(config: dict[str, Any]) -> None:
    """A planner that is unknown, missing, failing or no ``Planner``: one line naming the key
    (exit 2; 3 where the user's code fails)."""
    for key, name in named_planners(config):
        try:
            resolve_planner(name)
        except ConfigurationError as exc:
            raise type(exc)(f"config {key}: {exc}") from None


def check_one_planner_per_plans(runs: Iterable[tuple[str, str, str, str]]) -> None:
    """``runs``: (dataset, method, planner, plans name). Two methods of a dataset whose planners
    differ but whose plans have one name would write one file: refused in one line."""
    seen: dict[tuple[str, str], tuple[str, type]] = {}
    for dataset, method, planner, plans_name in runs:
        cls = resolve_planner(planner)
        first = seen.setdefault((dataset, plans_name), (method, cls))
        if first[1] is not cls:
            msg = (
                f"config methods: {first[0]} and {method} plan {dataset} with different planners "
                f"({first[1].__name__}, {cls.__name__}) into the same plans {plans_name}: give "
                "one planner another plans name (its class attribute plans_name)"
            )
            raise ConfigurationError(msg)
