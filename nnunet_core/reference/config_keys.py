"""The configuration reference: every key of ``workflow/schemas/config.schema.yaml`` as markdown.

The schema is the one home of each key's description (its ``description:``); this page adds the
type, default and bounds the schema states beside it. Keys are dotted paths (``training.epochs``);
an item of a list of mappings is ``[]`` (``methods[].name``) and a mapping's free name is ``<name>``
(``planning.overrides.<name>.inherits_from``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

INTRO = """\
# Configuration reference

Every key of the workflow's config, written from `workflow/schemas/config.schema.yaml` when the
site is built: the schema checks a config before any job runs, and its `description:` fields are
the text below. Set only what you change; a key you leave out takes its default (upstream
nnU-Net's method). How the two config files, `--config` overrides and the checks work:
[Your own data](../own-data.md#the-config).
"""


@dataclass(frozen=True)
class Key:
    """One config key: its dotted path and the schema node that describes it."""

    path: str
    node: dict[str, Any]
    required: bool = False


def schema_keys(schema: dict[str, Any], prefix: str = "") -> Iterator[Key]:
    """Every key under ``schema``'s properties, parents before their children.

    A ``$ref`` is named, not followed (``datasets[].synthetic`` is ``dataset.synthetic``'s)."""
    required = set(schema.get("required", ()))
    for name, node in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        yield Key(path, node, name in required)
        yield from _nested_keys(node, path)


def _nested_keys(node: dict[str, Any], path: str) -> Iterator[Key]:
    if "properties" in node:
        yield from schema_keys(node, f"{path}.")
    items = node.get("items")
    if isinstance(items, dict) and "properties" in items:
        yield from schema_keys(items, f"{path}[].")
    free = node.get("additionalProperties")
    if isinstance(free, dict) and "properties" in free:
        yield from schema_keys(free, f"{path}.<name>.")


def config_reference(schema: dict[str, Any]) -> str:
    """The reference page: the top-level settings in one table, then one table per top-level key
    that holds keys, in the schema's order."""
    sections: dict[str, list[Key]] = {"Top level": []}
    for key in schema_keys(schema):
        top = key.path.split(".")[0].split("[")[0]
        nested = any(True for _ in _nested_keys(schema["properties"][top], top))
        sections.setdefault(top if nested else "Top level", []).append(key)
    parts = [INTRO]
    for top, keys in sections.items():
        parts.append(f"## {top}\n\n| key | default | type | meaning |\n|---|---|---|---|")
        parts.extend(_row(key) for key in keys)
        parts.append("")
    return "\n".join(parts)


def _row(key: Key) -> str:
    node = key.node
    cells = [f"`{key.path}`", _default(key), _type(node), _meaning(node)]
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"


def _default(key: Key) -> str:
    if "default" in key.node:
        return f"`{_literal(key.node['default'])}`"
    return "(required)" if key.required else "(none)"


def _literal(value: Any) -> str:
    """A value as a YAML config spells it (``null``, ``true``, ``[0, 1]``)."""
    return json.dumps(value).replace('"', "") if not isinstance(value, str) else value


def _type(node: dict[str, Any]) -> str:
    if "$ref" in node:
        return "as `" + _ref_key(node["$ref"]) + "`"
    if "oneOf" in node:
        return " or ".join(_type(option) for option in node["oneOf"])
    kinds = node.get("type", "any")
    text = " or ".join(kinds) if isinstance(kinds, list) else kinds
    if "enum" in node:
        text += ": " + ", ".join(f"`{v}`" for v in node["enum"])
    items = node.get("items")
    if isinstance(items, dict) and "properties" not in items:
        return f"{text} of {_type(items)}"
    return f"{text} {_bounds(node)}".strip()


def _bounds(node: dict[str, Any]) -> str:
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum")
    open_low = "exclusiveMinimum" in node and "minimum" not in node
    if low is None and high is None:
        return ""
    if high is None:
        return f"({'>' if open_low else '>='} {low})"
    if low is None:
        return f"(<= {high})"
    return f"({'>' if open_low else '>='} {low}, <= {high})"


def _ref_key(ref: str) -> str:
    # "#/properties/dataset/properties/id" -> dataset.id
    parts = ref.removeprefix("#/").split("/")
    names = [p for i, p in enumerate(parts) if i % 2 == 1 and parts[i - 1] == "properties"]
    return ".".join(names) if names else ref


def _meaning(node: dict[str, Any]) -> str:
    text = node.get("description", "")
    if not text and "$ref" in node:
        return "as `" + _ref_key(node["$ref"]) + "`"
    return " ".join(text.split())
