"""The planners a config names, checked before any job: each one found and a ``Planner``, and
no two planners of a dataset writing the same plans file; and the data folders a run's planner
names (each run's preprocess rule makes only those).

A user's planner is imported here, at parse time (``planning.user_planner``): its plans name
names the files of the plan, preprocess and train rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.base import FULLRES, LOWRES
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


def data_identifier_pattern(planning: Mapping[str, Any], plans_name: str) -> str:
    """A regex of exactly the data folders the run's plans can name: its planner's
    ``data_identifier`` of each configuration and the overrides' own ``data_identifier``.

    Every run of a dataset (its seeds, its methods) has a preprocess rule whose output pattern is
    the same; the earlier run's rule wins where several could make a folder. A method whose
    planner names data of its own (a user's planner: ``BigPatchPlans_2d``) must make that data
    with its own rule and plans, so each rule is limited to its own planner's folders.
    """
    planner = resolve_planner(planning["planner"])(plans_name=plans_name)
    names = [planner.data_identifier(c) for c in ("2d", FULLRES, LOWRES)]
    for override in (planning.get("overrides") or {}).values():
        if isinstance(override.get("data_identifier"), str):
            names.append(override["data_identifier"])
    return "|".join(re.escape(name) for name in dict.fromkeys(names))
