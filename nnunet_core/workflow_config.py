"""Checks and lookups the Snakemake workflow needs beyond the JSON schema.

Kept in the package (not in the .smk files) so they are plain, unit-tested Python.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.plans import is_trainable, resolve_configuration
from nnunet_core.training.trainer_variants import parse_trainer_name

_INTEGER = re.compile(r"^[+-]?\d+$")
_NULL_WORDS = frozenset({"null", "~", "none", ""})
_BOOLEAN_WORDS = {"true": True, "false": False}


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


def schema_errors(config: dict[str, Any], schema_path: str | Path) -> list[str]:
    """Every schema violation as one line naming the key, e.g. ``planning.bogus: unknown key``."""
    schema = yaml.safe_load(Path(schema_path).read_text())
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


def check_config(config: dict[str, Any]) -> None:
    """Cross-field rules the schema cannot express; one clear message per problem."""
    synthetic = config["dataset"].get("synthetic", {})
    if synthetic.get("enabled"):
        shape, spacing = synthetic.get("shape"), synthetic.get("spacing")
        if shape is not None and spacing is not None and len(shape) != len(spacing):
            msg = f"config dataset.synthetic: shape {shape} and spacing {spacing} differ in length"
            raise ConfigurationError(msg)
        if config["dataset"].get("raw_root") is not None:
            msg = "config dataset: raw_root is set but synthetic.enabled is true; choose one"
            raise ConfigurationError(msg)
    trainer = config.get("training", {}).get("trainer")
    if trainer is not None:
        try:
            parse_trainer_name(trainer)
        except ConfigurationError as exc:
            msg = f"config training.trainer: {exc}"
            raise ConfigurationError(msg) from None
    for name, override in config.get("planning", {}).get("overrides", {}).items():
        if override.get("inherits_from") == name:
            msg = f"config planning.overrides.{name}: a configuration cannot inherit from itself"
            raise ConfigurationError(msg)


def selected_configurations(plans: dict[str, Any], requested: list[str] | None) -> list[str]:
    """The requested configurations (each must be in the plans), or every trainable one."""
    available = list(plans["configurations"])
    if requested is None:
        return [name for name in available if is_trainable(plans, name)]
    missing = [name for name in requested if name not in available]
    if missing:
        msg = (
            f"config planning.configurations: {', '.join(missing)} not in the plans "
            f"(planned: {', '.join(available)})"
        )
        raise ConfigurationError(msg)
    return list(requested)


def data_identifier_of(plans: dict[str, Any], name: str) -> str:
    """The preprocessed data folder a configuration reads."""
    return resolve_configuration(plans, name)["data_identifier"]
