"""User configuration overrides: extra (inheriting) configurations added to generated plans.

Upstream resolves ``inherits_from`` with a *shallow* ``dict.update``, so a child that gives only
part of a nested dict (e.g. ``architecture.arch_kwargs.features_per_stage``) would lose the rest
of the parent's ``architecture``. Each override is therefore deep-merged onto its parent's resolved
value before it is written: the written child holds complete nested dicts, and both our resolver and
upstream's read the intended configuration.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import INHERITS_KEY, resolve_configuration

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
# Keys that change the preprocessed arrays: changing them needs a data_identifier of its own.
PREPROCESSING_KEYS = (
    "preprocessor_name",
    "spacing",
    "normalization_schemes",
    "use_mask_for_norm",
    "resampling_fn_data",
    "resampling_fn_seg",
    "resampling_fn_data_kwargs",
    "resampling_fn_seg_kwargs",
)


def deep_merge(base: Any, update: Any) -> Any:
    """``update`` over ``base``; dicts merge key by key, anything else is replaced."""
    if not (isinstance(base, dict) and isinstance(update, dict)):
        return copy.deepcopy(update)
    merged = copy.deepcopy(base)
    for key, value in update.items():
        merged[key] = deep_merge(merged[key], value) if key in merged else copy.deepcopy(value)
    return merged


def _check_architecture(name: str, config: dict[str, Any]) -> None:
    """Stage counts agree and the patch fits the pooling (what a network build would reject)."""
    kwargs = config.get("architecture", {}).get("arch_kwargs", {})
    n_stages = kwargs.get("n_stages")
    if n_stages is None:
        return
    per_stage = (
        "features_per_stage",
        "kernel_sizes",
        "strides",
        "n_conv_per_stage",
        "n_blocks_per_stage",
    )
    for key in per_stage:
        if key in kwargs and len(kwargs[key]) != n_stages:
            msg = (
                f"override {name!r}: {key} has {len(kwargs[key])} entries but n_stages is "
                f"{n_stages}"
            )
            raise ConfigurationError(msg)
    decoder = kwargs.get("n_conv_per_stage_decoder")
    if decoder is not None and len(decoder) != n_stages - 1:
        msg = (
            f"override {name!r}: n_conv_per_stage_decoder has {len(decoder)} entries, expected "
            f"n_stages - 1 = {n_stages - 1}"
        )
        raise ConfigurationError(msg)
    patch, strides = config.get("patch_size"), kwargs.get("strides")
    if patch is None or strides is None:
        return
    if any(len(s) != len(patch) for s in strides):
        msg = (
            f"override {name!r}: patch_size {list(patch)} and strides {strides} differ in "
            "dimensions"
        )
        raise ConfigurationError(msg)
    for axis, size in enumerate(patch):
        factor = math.prod(int(s[axis]) for s in strides)
        if int(size) <= 0 or int(size) % factor != 0:
            msg = (
                f"override {name!r}: patch_size {list(patch)} axis {axis} ({size}) is not "
                f"divisible by the product of strides on that axis ({factor})"
            )
            raise ConfigurationError(msg)


def _check_data_identifier(
    name: str, parent: dict[str, Any], child: dict[str, Any], given: dict[str, Any]
) -> None:
    if "data_identifier" in given:
        return
    changed = [k for k in PREPROCESSING_KEYS if k in given and child.get(k) != parent.get(k)]
    if changed:
        msg = (
            f"override {name!r} changes {', '.join(changed)}, which changes the preprocessed data: "
            "give it its own 'data_identifier' (it would otherwise reuse "
            f"{parent.get('data_identifier')!r})"
        )
        raise ConfigurationError(msg)


def apply_override(plans: dict[str, Any], name: str, override: dict[str, Any]) -> None:
    """Add (or, without ``inherits_from``, update in place) one configuration of ``plans``."""
    configurations = plans["configurations"]
    if not isinstance(name, str) or not NAME_RE.match(name):
        msg = f"override name {name!r} must be letters, digits, '_', '-' or '.' (it names folders)"
        raise ConfigurationError(msg)
    if not isinstance(override, dict):
        msg = f"override {name!r} must be a mapping of plan keys, got {type(override).__name__}"
        raise ConfigurationError(msg)
    given = {k: v for k, v in override.items() if k != INHERITS_KEY}
    parent_name = override.get(INHERITS_KEY)
    if parent_name is None:
        if name not in configurations:
            msg = (
                f"override {name!r} is a new configuration: it needs 'inherits_from' (one of "
                f"{', '.join(configurations)})"
            )
            raise ConfigurationError(msg)
        parent = resolve_configuration(plans, name)
    else:
        if name in configurations:
            msg = (
                f"override {name!r} already exists in the plans; drop 'inherits_from' to change it "
                "in place"
            )
            raise ConfigurationError(msg)
        if parent_name not in configurations:
            msg = (
                f"override {name!r}: parent configuration {parent_name!r} not in plans (available: "
                f"{', '.join(configurations)})"
            )
            raise ConfigurationError(msg)
        parent = resolve_configuration(plans, parent_name)
    expanded = {
        k: deep_merge(parent[k], v) if k in parent else copy.deepcopy(v) for k, v in given.items()
    }
    resolved = {**parent, **expanded}
    _check_architecture(name, resolved)
    _check_data_identifier(name, parent, resolved, given)
    if parent_name is None:
        configurations[name] = {**configurations[name], **expanded}
    else:
        configurations[name] = {INHERITS_KEY: parent_name, **expanded}


def apply_overrides(plans: dict[str, Any], overrides: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``plans`` with every override applied in order (later ones may inherit earlier
    ones).

    Example: ``{"3d_fullres_bs4": {"inherits_from": "3d_fullres", "batch_size": 4}}``.
    """
    if not isinstance(overrides, dict):
        msg = f"overrides must map configuration names to dicts, got {type(overrides).__name__}"
        raise ConfigurationError(msg)
    result = copy.deepcopy(plans)
    for name, override in overrides.items():
        apply_override(result, name, override)
    return result
