"""Experiment planning: from a fingerprint to the plans dict (configurations, patch, batch,
network), by a preset planner or a user's (``planning.base.Planner``, ``planning.user_planner``).

Reproduces nnU-Net v2.8.1's ``ExperimentPlanner`` and its ResEnc presets number for number, and
writes the same keys in the same order, so a plans file made here is interchangeable with
upstream's. A user's planner adds one key, ``planner_source`` (its name, file and sha256).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nnunet_core.planning.base import Planner
from nnunet_core.planning.plan_parts import PREPROCESSOR_NAME, reader_writer_name
from nnunet_core.planning.presets import get_preset
from nnunet_core.planning.user_planner import PLANNER_SOURCE_KEY, planner_record, resolve_planner

__all__ = ["PREPROCESSOR_NAME", "get_preset", "plan_experiment", "reader_writer_name"]


def plan_experiment(
    fingerprint: dict[str, Any],
    dataset_json: dict[str, Any],
    dataset_name: str,
    gpu_memory_target_gb: float | None = None,
    planner: str | type[Planner] = "default",
    overwrite_target_spacing: Sequence[float] | None = None,
    plans_name: str | None = None,
) -> dict[str, Any]:
    """The whole plans dict (upstream's keys and order) for a fingerprint and ``dataset.json``.

    ``planner``: a preset's name, a user's planner name (``/path/file.py:Class``, ...) or a
    ``Planner`` class. ``gpu_memory_target_gb`` defaults to the planner's own target (8 GB;
    24/40 for ResEncL/XL); ``plans_name`` to its ``default_plans_name()``.
    """
    cls = resolve_planner(planner) if isinstance(planner, str) else planner
    instance = cls(gpu_memory_target_gb, overwrite_target_spacing, plans_name)
    plans = instance.plan(fingerprint, dataset_json, dataset_name)
    record = planner_record(planner) if isinstance(planner, str) else None
    if record is None:
        return plans
    # after experiment_planner_used, which names the class as upstream does
    keys = list(plans)
    at = keys.index("experiment_planner_used") + 1
    return (
        {k: plans[k] for k in keys[:at]}
        | {PLANNER_SOURCE_KEY: record}
        | {k: plans[k] for k in keys[at:]}
    )
