"""Checks and lookups the Snakemake workflow needs beyond the JSON schema.

Kept in the package (not in the .smk files) so they are plain, unit-tested Python.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.plans import is_trainable, resolve_configuration


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
