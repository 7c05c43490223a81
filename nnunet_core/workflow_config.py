"""Checks and lookups the Snakemake workflow needs beyond the JSON schema.

Kept in the package (not in the .smk files) so they are plain, unit-tested Python.
"""

from __future__ import annotations

from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.plans import is_trainable, resolve_configuration


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
