"""How paper.smk joins one run.smk module per (dataset, seed) into one workflow.

Each run's rules are named ``<run>_<rule>`` (``Dataset004_Hippocampus_seed1_train``). A profile's
per-rule settings name the plain rule, so they are copied to every run's prefixed name; the seeds
(and methods) of a dataset declare the same dataset checks, plans and preprocessing, so the later
run's rule gives way to the earlier run's. Functions of names and outputs, so that both are
unit-tested (tests/unit/workflow/test_workflow_paper_rules.py) without a workflow; one hands the
copied settings to Snakemake (``copy_profile_settings_to_runs``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

Setting = TypeVar("Setting")


def prefixed_settings(by_rule: Mapping[str, Setting], run_prefix: str) -> dict[str, Setting]:
    """A profile's settings per rule (``train: {slurm_partition: gpu}``) under the names of one
    run's rules (``<run_prefix>train``)."""
    return {f"{run_prefix}{name}": setting for name, setting in by_rule.items()}


def copy_profile_settings_to_runs(workflow: Any, run_prefixes: Sequence[str]) -> None:
    """Give a profile's (or the command line's) set-resources and set-threads of a rule to every
    run's rule of that name: ``train: {slurm_partition: gpu}`` holds for
    ``Dataset004_Hippocampus_seed1_train`` too. A run's rule named by its own full name keeps
    its own setting.

    Snakemake applies them by the rule's own name when it makes the rule, reading
    ``workflow.resource_settings``. So before any module makes its rules, the settings become a
    copy (``dataclasses.replace``) whose ``overwrite_resources`` and ``overwrite_threads`` name
    the runs' rules as well. Public API only: these are the fields of Snakemake's
    ``ResourceSettings`` that ``--set-resources``/``--set-threads`` and a profile fill, and
    ``resource_settings`` is a public field of its ``Workflow``; the copy's parsed views are
    Snakemake's own, made from them (nothing cached is edited), and the jobs it submits get the
    runs' names in their ``--set-resources`` as well.
    """
    settings = workflow.resource_settings
    copied = []
    for given in (settings.overwrite_resources, settings.overwrite_threads):
        table = dict(given)
        for prefix in run_prefixes:
            for name, setting in prefixed_settings(given, prefix).items():
                table.setdefault(name, setting)
        copied.append(table)
    workflow.resource_settings = dataclasses.replace(
        settings, overwrite_resources=copied[0], overwrite_threads=copied[1]
    )


def rules_added(before: Iterable[str], after: Iterable[str], run_prefix: str) -> set[str]:
    """The plain names of the rules a run's module added (its names without ``run_prefix``)."""
    known = set(before)
    return {name.removeprefix(run_prefix) for name in after if name not in known}


def shared_rule_order(
    run_names: Sequence[str],
    rules_of_run: Mapping[str, set[str]],
    outputs_of: Callable[[str], list[str]],
) -> list[tuple[str, str]]:
    """(earlier, later) rule pairs, in run order, where a later run's rule makes files an
    earlier run's makes too (the same, or some: the planners of two methods both write the
    dataset's dataset.json): Snakemake must be told which of the two makes them."""
    order = []
    for later_index, later in enumerate(run_names):
        for earlier in run_names[:later_index]:
            for name in sorted(rules_of_run[later] & rules_of_run[earlier]):
                first, second = f"{earlier}_{name}", f"{later}_{name}"
                if set(outputs_of(first)) & set(outputs_of(second)):
                    order.append((first, second))
    return order
