"""Plans files: loading, configuration inheritance (``inherits_from``) and lookups.

A child configuration is its parent's dict updated with the child's keys (a shallow update, as
upstream does), so a plans file written here reads the same in upstream nnU-Net. The code reads
plans through ``Plans`` (a read-only view); the planner and the overrides build the raw dict,
which is what is written and hashed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.json_input import read_json_object
from nnunet_core.io.plans_configuration import Configuration

INHERITS_KEY = "inherits_from"
IDENTITY_AXES = (0, 1, 2)


def resolve_configuration(plans: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The full configuration dict of ``name`` in a raw plans dict, inheritance applied (cycles
    are errors). For plans being built; readers use ``Plans.configuration``."""
    configurations = plans["configurations"]
    chain: list[str] = []
    current = name
    while True:
        if current not in configurations:
            available = ", ".join(configurations)
            msg = (
                f"configuration {current!r} not in plans {plans.get('plans_name', '')} (available: "
                f"{available})"
            )
            raise ConfigurationError(msg)
        if current in chain:
            msg = f"configuration inheritance cycle: {' -> '.join([*chain, current])}"
            raise ConfigurationError(msg)
        chain.append(current)
        parent = configurations[current].get(INHERITS_KEY)
        if parent is None:
            break
        current = parent
    resolved: dict[str, Any] = {}
    for link in reversed(chain):
        resolved.update(copy.deepcopy(configurations[link]))
    resolved.pop(INHERITS_KEY, None)
    return resolved


class Plans:
    """A plans file, read-only: its configurations resolved and the lookups the code needs."""

    def __init__(self, raw: Mapping[str, Any], source: str | Path | None = None) -> None:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("configurations"), Mapping):
            msg = f"{source or 'plans'}: no 'configurations' (not an nnU-Net v2 plans file?)"
            raise ConfigurationError(msg)
        self._raw = copy.deepcopy(dict(raw))
        self._source = str(source) if source is not None else None

    @classmethod
    def load(cls, path: str | Path) -> Plans:
        path = Path(path)
        if not path.is_file():
            msg = f"{path}: plans file not found (run `nnunet-core plan` first)"
            raise ConfigurationError(msg)
        return cls(read_json_object(path, "plans file", ConfigurationError), path)

    def __repr__(self) -> str:
        return f"Plans({self.name!r}, source={self._source!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plans):
            return NotImplemented
        return self._raw == other._raw

    __hash__ = None  # type: ignore[assignment]  # mutable contents: not a dict key

    @property
    def raw(self) -> dict[str, Any]:
        """A copy of the plans dict as written (upstream's keys), for writing and hashing."""
        return copy.deepcopy(self._raw)

    @property
    def source(self) -> str:
        """The file the plans came from, else ``plans <name>``: the prefix of error messages."""
        return self._source or f"plans {self.name}"

    @property
    def name(self) -> str:
        return str(self._raw.get("plans_name") or "")

    @property
    def dataset_name(self) -> str | None:
        value = self._raw.get("dataset_name")
        return None if value is None else str(value)

    @property
    def image_reader_writer(self) -> str | None:
        value = self._raw.get("image_reader_writer")
        return str(value) if value else None

    @property
    def transpose_forward(self) -> tuple[int, ...]:
        """Raw image axes -> network axes (identity when the plans give none)."""
        return tuple(int(a) for a in self._raw.get("transpose_forward", IDENTITY_AXES))

    @property
    def transpose_backward(self) -> tuple[int, ...]:
        return tuple(int(a) for a in self._raw.get("transpose_backward", IDENTITY_AXES))

    @property
    def foreground_intensity_properties(self) -> dict[str, Any] | None:
        """Per channel (keys '0', '1', ...): the fingerprint's foreground intensity statistics."""
        value = self._raw.get("foreground_intensity_properties_per_channel")
        return copy.deepcopy(value) if value is not None else None

    @property
    def configuration_names(self) -> list[str]:
        """Names of every configuration in the plans, in file order."""
        return list(self._raw["configurations"])

    def __contains__(self, name: object) -> bool:
        return name in self._raw["configurations"]

    def configuration(self, name: str) -> Configuration:
        """``name`` with ``inherits_from`` applied; an unknown name is one line naming the file
        and the configurations it has."""
        if name not in self:
            msg = (
                f"{self.source}: no configuration {name!r} (available: "
                f"{', '.join(self.configuration_names)})"
            )
            raise ConfigurationError(msg)
        where = f"plans {self.name} configuration {name}"
        return Configuration(name, resolve_configuration(self._raw, name), where)

    def previous_stage_of(self, name: str) -> str | None:
        """The configuration whose predictions a cascade stage trains on (None: not a cascade)."""
        return self.configuration(name).previous_stage

    def is_trainable(self, name: str) -> bool:
        """A configuration that has its own data (cascade stages need a previous stage first)."""
        return self.previous_stage_of(name) is None

    def data_identifier_of(self, name: str) -> str:
        """The preprocessed data folder a configuration reads."""
        return self.configuration(name).data_identifier

    def data_identifier_groups(self, names: list[str] | None = None) -> dict[str, list[str]]:
        """Data identifier -> the configurations (of ``names``, default all) that read it, in
        file order: one preprocessing run serves each group (3d_fullres and 3d_cascade_fullres)."""
        groups: dict[str, list[str]] = {}
        for name in self.configuration_names if names is None else names:
            members = groups.setdefault(self.data_identifier_of(name), [])
            if name not in members:
                members.append(name)
        return groups

    def preprocessing_configuration(self, name: str) -> str:
        """The configuration to preprocess ``name``'s data with: itself, or for a cascade stage
        (no data of its own; upstream preprocesses none) a trainable configuration with the same
        data identifier (3d_cascade_fullres: 3d_fullres)."""
        if self.is_trainable(name):
            return name
        group = self.data_identifier_groups()[self.data_identifier_of(name)]
        return next((other for other in group if self.is_trainable(other)), name)


def load_plans(path: str | Path) -> Plans:
    """The plans file at ``path`` (a clear error when it does not exist)."""
    return Plans.load(path)
