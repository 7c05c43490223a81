"""The methods a paper compares (config ``methods``): each a trainer, a planner and configurations.

    methods:
      - {name: nnunet, trainer: nnUNetTrainer, baseline: true}
      - {name: nomirror, trainer: nnUNetTrainerNoMirroring}

Every (dataset, seed, method) is one run of ``workflow/rules/paper.smk``. A method's ``planner``
and ``configurations`` replace the dataset's planning keys; what it leaves out comes from them.
The trainer is passed on as written (``-tr``): which names are known is the trainer's business.
The run of a method is named and filed by the method's name only, so that adding a method to
the config leaves the runs, files and jobs of the others as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from nnunet_core.errors import ConfigurationError

# A method's name is part of rule names and folder names.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Method:
    """One entry of ``methods``; ``planner`` or ``configurations`` None: the dataset's."""

    name: str
    trainer: str
    planner: str | None = None
    configurations: tuple[str, ...] | None = None
    baseline: bool = False


def _method(index: int, entry: dict[str, Any]) -> Method:
    where = f"config methods[{index}]"
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        msg = f"{where}: name {name!r} must be letters, digits and _ (starting with a letter)"
        raise ConfigurationError(msg)
    trainer = entry.get("trainer")
    if not isinstance(trainer, str) or not trainer.strip():
        msg = f"{where} ({name}): trainer must be a non-empty name"
        raise ConfigurationError(msg)
    configurations = entry.get("configurations")
    return Method(
        name=name,
        trainer=trainer,
        planner=entry.get("planner"),
        configurations=tuple(configurations) if configurations else None,
        baseline=bool(entry.get("baseline", False)),
    )


def methods_of(config: dict[str, Any]) -> list[Method]:
    """The config's methods, the baseline first (then in the config's order); none: []."""
    entries = config.get("methods") or []
    methods = [_method(i, entry) for i, entry in enumerate(entries)]
    names = [m.name for m in methods]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        msg = f"config methods: name {twice[0]} given twice"
        raise ConfigurationError(msg)
    baselines = [m.name for m in methods if m.baseline]
    if methods and len(baselines) != 1:
        found = ", ".join(baselines) if baselines else "none"
        msg = f"config methods: mark exactly one method baseline: true (found: {found})"
        raise ConfigurationError(msg)
    return sorted(methods, key=lambda m: not m.baseline)


def apply_method(run: dict[str, Any], method: Method) -> None:
    """A run's config, in place, for ``method``: its trainer, planner and configurations, and
    ``method``: its name (the run's files go under ``<method>/``) and whether its plan job
    declares the dataset's preprocessed dataset.json (``runs.run_instances`` sets it: every
    planner writes that file, and two rules declaring it would be an error)."""
    run["training"] = {**run.get("training", {}), "trainer": method.trainer}
    planning = dict(run.get("planning", {}))
    if method.planner is not None:
        planning["planner"] = method.planner
    if method.configurations is not None:
        planning["configurations"] = list(method.configurations)
    run["planning"] = planning
    run["method"] = {"name": method.name, "writes_dataset_json": True}
