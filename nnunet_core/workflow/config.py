"""Checks and lookups the Snakemake workflow needs beyond the JSON schema.

Kept in the package (not in the .smk files) so they are plain, unit-tested Python.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from nnunet_core.cluster import slurm
from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.trainer_syntax import check_trainer_source
from nnunet_core.io.atomic import unwritable_reason
from nnunet_core.io.plans import Plans
from nnunet_core.layout.predictions import PREDICTIONS_FOLDER, RESERVED_FOLDERS
from nnunet_core.layout.preprocessed import SPLITS_JSON
from nnunet_core.layout.roots import Roots, dataset_folder_name, raw_dataset_dir
from nnunet_core.layout.work import DEFAULT_WORK_DIR, WORK_LOGS, WORK_PREPROCESSED, WORK_RESULTS
from nnunet_core.tracking import missing_package_line
from nnunet_core.training.trainer.lookup import check_trainer_name
from nnunet_core.workflow.msd_source import check_msd_task, msd_task_of
from nnunet_core.workflow.path_values import check_shell_paths
from nnunet_core.workflow.pretrained import resolve_pretrained_weights
from nnunet_core.workflow.runs import check_raw_dataset
from nnunet_core.workflow.work_dir_checks import check_work_dir_placement

_INTEGER = re.compile(r"^[+-]?\d+$")
_NULL_WORDS = frozenset({"null", "~", "none", ""})
_BOOLEAN_WORDS = {"true": True, "false": False}
# Every configuration the planner can write (nnunet_core.planning.planner; 3d_lowres and
# 3d_cascade_fullres only for large images); planning.overrides add their own names.
PLANNER_CONFIGURATIONS = ("2d", "3d_fullres", "3d_lowres", "3d_cascade_fullres")
ALL_FOLDS = "all"
LOWRES, CASCADE = "3d_lowres", "3d_cascade_fullres"
# The planner's cascade entry (nnunet_core.planning.planner), for the checks before the plans exist.
_PLANNER_CASCADE = {CASCADE: {"previous_stage": LOWRES}}


def _allowed_types(schema: dict[str, Any] | None) -> list[str]:
    declared = (schema or {}).get("type", [])
    return [declared] if isinstance(declared, str) else list(declared)


def _typed_value(text: str, types: list[str]) -> Any:
    """``text`` as the first schema type it spells, else unchanged (a string stays a string)."""
    word = text.strip().casefold()
    if "null" in types and word in _NULL_WORDS:
        return None
    if "boolean" in types and word in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[word]
    if ("integer" in types or "number" in types) and _INTEGER.match(text.strip()):
        return int(text)
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _untyped_value(text: str) -> Any:
    """A value the schema does not type (planning.overrides): YAML's reading of it."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, int | float | bool) or value is None else text


def _subschema(schema: dict[str, Any], key: str) -> dict[str, Any] | None:
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def coerce_command_line_values(
    config: dict[str, Any], command_line: Any, schema: dict[str, Any] | None
) -> None:
    """Give ``--config`` values their schema types, in place.

    Snakemake reads a nested ``--config key='{id: 4}'`` with YAML's base loader, so every nested
    scalar arrives as a string ('4', 'true', 'null'); a value typed on the command line must
    mean what it means in a config file. Only keys given on the command line are touched.
    """
    for key, given in command_line.items():
        if key not in config:
            continue
        sub = _subschema(schema, key) if schema is not None else None
        config[key] = _coerced(config[key], given, sub, schema is not None and sub is None)


def _coerced(value: Any, given: Any, schema: dict[str, Any] | None, free: bool) -> Any:
    if isinstance(value, dict) and isinstance(given, dict):
        coerce_command_line_values(value, given, None if free else schema)
        return value
    if isinstance(value, list) and isinstance(given, list) and len(value) == len(given):
        items = None if free else (schema or {}).get("items")
        return [
            _coerced(v, g, items, free or items is None) for v, g in zip(value, given, strict=True)
        ]
    if not isinstance(value, str) or value != given:
        return value
    if free or schema is None:
        return _untyped_value(value)
    return _typed_value(value, _allowed_types(schema))


@functools.cache
def load_schema(schema_path: str | Path) -> dict[str, Any]:
    """The config schema, read once per process (callers must not change it)."""
    # libyaml's loader where PyYAML has it: the pure-Python one took 0.07 CPU s for the schema,
    # which a workflow's start reads twice (the test suite starts some 150 workflows)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(Path(schema_path).read_text(), Loader=loader)  # noqa: S506 - a safe loader


def schema_errors(config: dict[str, Any], schema_path: str | Path) -> list[str]:
    """Every schema violation as one line naming the key, e.g. ``planning.bogus: unknown key``."""
    schema = load_schema(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    lines = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            unknown = sorted(set(error.instance) - set(allowed))
            for key in unknown:
                prefix = f"{where}." if error.absolute_path else ""
                lines.append(f"{prefix}{key}: unknown key (allowed: {', '.join(allowed)})")
        else:
            lines.append(f"{where}: {error.message}")
    return lines


def validate_config(config: dict[str, Any], schema_path: str | Path) -> None:
    """Raise one clear message listing every wrong key before anything runs."""
    errors = schema_errors(config, schema_path)
    if errors:
        msg = "invalid config: " + "; ".join(errors)
        raise ConfigurationError(msg)


@dataclass(frozen=True)
class Execution:
    """What a Snakefile knows at parse time about where its jobs will run.

    Snakemake picks the executor only after parsing (``workflow.executor_plugin`` is None until
    then), so the executor itself is unknown here. What is known: a dry run (``-n``); a job
    inside a cluster allocation (exec mode remote); ``--jobs``/``-j`` (``workflow.nodes``),
    which every cluster executor needs and a local run turns into ``--cores``.
    """

    dry_run: bool = False
    remote_job: bool = False
    max_jobs: int | None = None

    @classmethod
    def of_workflow(cls, workflow: Any) -> Execution:
        return cls(
            dry_run=bool(getattr(workflow.output_settings, "dryrun", False)),
            remote_job=bool(workflow.remote_exec),
            max_jobs=workflow.nodes,
        )

    @property
    def jobs_run_here(self) -> bool:
        """A real run whose jobs run on this machine (no --jobs: no cluster executor)."""
        return not self.dry_run and not self.remote_job and not self.max_jobs


def check_config(config: dict[str, Any], execution: Execution | None = None) -> None:
    """Cross-field rules the schema cannot express; one clear message per problem.

    ``execution``: how the jobs will run (common.smk passes ``Execution.of_workflow(workflow)``;
    None skips the one rule that needs it, ``training.nodes``).
    """
    work_dir = config.get("work_dir", DEFAULT_WORK_DIR)
    # before anything else: a work_dir of its own, apart from the raw data (nothing deleted there)
    check_work_dir_placement(work_dir, config["dataset"].get("raw_root"))
    # paths reach the shells quoted; the few no quoting makes safe are refused (path_values)
    check_shell_paths(config)
    check_work_dir_writable(work_dir)
    synthetic = config["dataset"].get("synthetic", {})
    if synthetic.get("enabled"):
        shape, spacing = synthetic.get("shape"), synthetic.get("spacing")
        if shape is not None and spacing is not None and len(shape) != len(spacing):
            msg = f"config dataset.synthetic: shape {shape} and spacing {spacing} differ in length"
            raise ConfigurationError(msg)
        if config["dataset"].get("raw_root") is not None:
            msg = "config dataset: raw_root is set but synthetic.enabled is true; choose one"
            raise ConfigurationError(msg)
    if msd_task_of(config["dataset"]) is not None:
        check_msd_task(config["dataset"])
    elif not synthetic.get("enabled"):
        check_raw_dataset(config)
    training = config.get("training", {})
    trainer = training.get("trainer")
    if trainer is not None:
        try:
            code = check_trainer_name(trainer)  # a file or module is only located, not imported
            if code is not None:  # its class and Trainer base, from the syntax tree (no import)
                check_trainer_source(code)
        except ConfigurationError as exc:
            msg = f"config training.trainer: {exc}"
            raise ConfigurationError(msg) from None
    if "folds" in training:
        check_folds(training["folds"], *fold_count(config))
    # a missing file, a folder without the fold, a zip without the member: before any job
    resolve_pretrained_weights(
        training.get("pretrained_weights"), config.get("work_dir", DEFAULT_WORK_DIR)
    )
    missing = missing_package_line((config.get("tracking") or {}).get("backend", "none"))
    if missing is not None:  # before any job, as the train command's own check would in each
        raise ConfigurationError(f"config tracking.backend: {missing}")
    nodes = training.get("nodes", 1)
    if nodes > 1 and execution is not None and execution.jobs_run_here:
        raise ConfigurationError(slurm.multi_node_refusal(nodes))
    planning = config.get("planning", {})
    overrides = planning.get("overrides", {})
    for name, override in overrides.items():
        if name in RESERVED_FOLDERS or not re.fullmatch(r"[A-Za-z0-9_]+", name):
            msg = (
                f"config planning.overrides: {name!r} cannot name a configuration (letters, "
                f"digits and _ only, and not {' or '.join(RESERVED_FOLDERS)}: folders of the "
                "test predictions)"
            )
            raise ConfigurationError(msg)
        if override.get("inherits_from") == name:
            msg = f"config planning.overrides.{name}: a configuration cannot inherit from itself"
            raise ConfigurationError(msg)
    possible = [*PLANNER_CONFIGURATIONS, *overrides]
    for name in planning.get("configurations") or []:
        if name not in possible:
            msg = (
                f"config planning.configurations: {name!r} is no configuration the planner makes "
                f"or planning.overrides defines (possible: {', '.join(possible)})"
            )
            raise ConfigurationError(msg)
    requested = planning.get("configurations")
    if requested and CASCADE in requested:
        # the plans check it again for overrides inheriting from a cascade (configurations_of_run)
        configurations_of_run(
            Plans({"configurations": {name: {} for name in requested} | _PLANNER_CASCADE}),
            [name for name in requested if name in (CASCADE, LOWRES)],
            training.get("folds", []),
            fold_count(config)[0],
        )


def check_work_dir_writable(work_dir: str | Path) -> None:
    """``work_dir`` and the folders the workflow writes in it, where they exist, must be writable:
    a read-only mount (or no write permission) is refused before any job, with one line naming
    the folder (a missing one is created by the first job that writes there)."""
    work = Path(work_dir)
    written = (WORK_PREPROCESSED, WORK_RESULTS, PREDICTIONS_FOLDER, WORK_LOGS)
    for folder in (work, *(work / name for name in written)):
        reason = unwritable_reason(folder) if folder.is_dir() else None
        if reason is not None:
            msg = (
                f"config work_dir: {folder.absolute()} is not writable ({reason}); the workflow "
                "writes its results there: make it writable or choose another work_dir"
            )
            raise ConfigurationError(msg)


def fold_count(config: dict[str, Any]) -> tuple[int, str]:
    """How many folds the splits will have, and a phrase saying where that number comes from.

    A ``splits_final.json`` in the raw dataset folder replaces the generated split (the splits
    rule copies it); else ``splits.num_folds``.
    """
    dataset = config["dataset"]
    if not dataset.get("synthetic", {}).get("enabled") and "name" in dataset and "id" in dataset:
        roots = Roots.in_work_dir(
            config.get("work_dir", DEFAULT_WORK_DIR), raw=dataset.get("raw_root")
        )
        name = dataset_folder_name(dataset["id"], dataset["name"])
        user_file = raw_dataset_dir(roots, name) / SPLITS_JSON
        try:
            splits = json.loads(user_file.read_text())
        except (OSError, ValueError):
            splits = None  # absent; a broken file is the splits rule's error
        if isinstance(splits, list) and splits:
            count = len(splits)
            return count, f"{user_file} has {count} folds, 0-{count - 1}"
    count = config.get("splits", {}).get("num_folds", 5)
    return count, f"splits.num_folds is {count}, so the folds are 0-{count - 1}"


def check_folds(folds: list[Any], num_folds: int, origin: str) -> None:
    """Each fold a number 0 .. num_folds - 1 or 'all', none twice (else one line naming it)."""
    seen: set[int | str] = set()
    for given in folds:
        fold: int | str | None = given if isinstance(given, int) else None
        if isinstance(given, str):
            fold = int(given) if given.isdigit() else (ALL_FOLDS if given == ALL_FOLDS else None)
        if fold is None:
            msg = f"config training.folds: {given!r} is not a fold (a number >= 0, or 'all')"
            raise ConfigurationError(msg)
        if fold != ALL_FOLDS and not 0 <= int(fold) < num_folds:
            msg = f"config training.folds: fold {given} does not exist: {origin} (or 'all')"
            raise ConfigurationError(msg)
        if fold in seen:
            msg = f"config training.folds: fold {given} is listed twice in {list(folds)}"
            raise ConfigurationError(msg)
        seen.add(fold)


def numbered_folds(folds: list[Any]) -> set[int]:
    """The numbered folds of ``training.folds`` (``'all'`` left out)."""
    return {int(f) for f in folds if isinstance(f, int) or str(f).isdigit()}


def configurations_of_run(
    plans: Plans,
    requested: list[str] | None,
    folds: list[Any],
    num_folds: int,
) -> tuple[list[str], list[str]]:
    """The configurations a run trains (``planning.configurations``) and notices to print.

    ``None``: every configuration in the plans, cascade stages included (upstream's
    find_best_configuration compares 3d_lowres and 3d_cascade_fullres like the others). A cascade
    stage trains on its previous stage's predictions of every training case, which the previous
    stage's folds write for their validation cases: it needs every fold 0..num_folds-1 of the
    splits in ``training.folds``. Without them an automatic choice leaves the cascade out with a
    notice; a requested cascade is an error, and so is one requested without its previous stage.
    """
    available = plans.configuration_names
    missing_folds = sorted(set(range(num_folds)) - numbered_folds(folds))
    if requested is None:
        chosen, notices = [], []
        for name in available:
            previous = plans.previous_stage_of(name)
            if previous is not None and (previous not in available or missing_folds):
                notices.append(
                    f"{name} left out: it trains on {previous}'s predictions of every training "
                    f"case, which needs every fold 0-{num_folds - 1} in training.folds (missing: "
                    f"{', '.join(map(str, missing_folds))})"
                )
                continue
            chosen.append(name)
        return chosen, notices
    missing = [name for name in requested if name not in available]
    if missing:
        msg = (
            f"config planning.configurations: {', '.join(missing)} not in the plans "
            f"{plans.name} of this dataset (planned: {', '.join(available)})"
        )
        raise ConfigurationError(msg)
    for name in requested:
        previous = plans.previous_stage_of(name)
        if previous is None:
            continue
        if previous not in requested:
            msg = (
                f"config planning.configurations: {name} trains on the predictions of its "
                f"previous stage {previous}: list {previous} too"
            )
            raise ConfigurationError(msg)
        if missing_folds:
            msg = (
                f"config training.folds: {name} trains on {previous}'s predictions of every "
                f"training case, written by {previous}'s folds 0-{num_folds - 1}: add fold(s) "
                f"{', '.join(map(str, missing_folds))} (or leave {name} out)"
            )
            raise ConfigurationError(msg)
    return list(requested), []
