"""One resolved plans configuration as a typed, read-only view.

The plans file stays upstream's JSON dict (written and hashed as is); this view only names the
keys the code reads, so a misspelt key is a typing error instead of a silent ``KeyError`` deep in
training, and a missing key is one clear line naming the plans and the configuration.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nnunet_core.errors import ConfigurationError


class Configuration:
    """A configuration with ``inherits_from`` applied (build it with ``Plans.configuration``)."""

    def __init__(self, name: str, resolved: Mapping[str, Any], where: str = "") -> None:
        self._name = name
        self._raw = copy.deepcopy(dict(resolved))
        self._where = where or f"configuration {name}"

    def __repr__(self) -> str:
        return f"Configuration({self._name!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Configuration):
            return NotImplemented
        return (self._name, self._raw) == (other._name, other._raw)

    __hash__ = None  # type: ignore[assignment]  # mutable contents: not a dict key

    @property
    def name(self) -> str:
        return self._name

    @property
    def where(self) -> str:
        """``plans <name> configuration <name>``: the prefix of error messages about it."""
        return self._where

    @property
    def raw(self) -> dict[str, Any]:
        """A copy of the resolved dict (for hashing, checkpoints and upstream-shaped output)."""
        return copy.deepcopy(self._raw)

    def has(self, key: str) -> bool:
        """Whether the resolved configuration gives ``key`` (optional keys of old plans)."""
        return key in self._raw

    def _required(self, key: str) -> Any:
        if key not in self._raw:
            msg = f"{self._where}: missing {key!r}"
            raise ConfigurationError(msg)
        return self._raw[key]

    @property
    def data_identifier(self) -> str:
        """The preprocessed data folder the configuration reads (shared by e.g. the cascade)."""
        return str(self._required("data_identifier"))

    @property
    def preprocessor_name(self) -> str | None:
        value = self._raw.get("preprocessor_name")
        return None if value is None else str(value)

    @property
    def batch_size(self) -> int:
        return int(self._required("batch_size"))

    @property
    def patch_size(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self._required("patch_size"))

    @property
    def spacing(self) -> tuple[float, ...]:
        """Target spacing in network (transposed) axis order."""
        return tuple(float(s) for s in self._required("spacing"))

    @property
    def median_image_size_in_voxels(self) -> tuple[float, ...]:
        return tuple(float(s) for s in self._required("median_image_size_in_voxels"))

    @property
    def normalization_schemes(self) -> tuple[str, ...]:
        return tuple(str(s) for s in self._required("normalization_schemes"))

    @property
    def use_mask_for_norm(self) -> tuple[bool, ...]:
        return tuple(bool(u) for u in self._raw.get("use_mask_for_norm") or ())

    @property
    def batch_dice(self) -> bool:
        return bool(self._required("batch_dice"))

    @property
    def architecture(self) -> dict[str, Any] | None:
        """``{network_class_name, arch_kwargs, _kw_requires_import}``; None in old plans."""
        value = self._raw.get("architecture")
        return copy.deepcopy(value) if isinstance(value, dict) else None

    @property
    def strides(self) -> list[list[int]]:
        """The network's pooling strides per stage (they decide deep supervision's scales)."""
        architecture = self.architecture or {}
        strides = (architecture.get("arch_kwargs") or {}).get("strides")
        if strides is None:
            msg = f"{self._where}: missing 'architecture.arch_kwargs.strides'"
            raise ConfigurationError(msg)
        return [[int(s) for s in stage] for stage in strides]

    def resampling_function(self, kind: str) -> str | None:
        """``resampling_fn_<kind>`` (kind: data, seg or probabilities); None when not given."""
        value = self._raw.get(f"resampling_fn_{kind}")
        return None if value is None else str(value)

    def resampling_function_kwargs(self, kind: str) -> dict[str, Any]:
        """``resampling_fn_<kind>_kwargs`` as given (empty when not given)."""
        return dict(self._raw.get(f"resampling_fn_{kind}_kwargs") or {})

    @property
    def previous_stage(self) -> str | None:
        """The configuration whose segmentations a cascade stage reads (None: not a cascade)."""
        value = self._raw.get("previous_stage")
        return None if value is None else str(value)

    @property
    def is_cascade_stage(self) -> bool:
        """Reads a previous stage's segmentations (upstream's ``is_cascaded``)."""
        return self.previous_stage is not None

    @property
    def next_stage(self) -> list[str]:
        """``next_stage`` as a list (upstream accepts one name or a list)."""
        value = self._raw.get("next_stage")
        if value is None:
            return []
        return [value] if isinstance(value, str) else [str(v) for v in value]
