"""What decides the preprocessed data of a configuration, and one entry per data identifier.

Configurations that share a data identifier (3d_fullres and 3d_cascade_fullres) share one
preprocessed folder, so they must agree on everything that shapes the arrays.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import Plans
from nnunet_core.preprocessing.resampling import resampling_kwargs

REQUIRED_KEYS = (
    "data_identifier",
    "spacing",
    "patch_size",
    "normalization_schemes",
    "use_mask_for_norm",
)


@dataclasses.dataclass(frozen=True)
class PreprocessingConfig:
    """The parts of a plans configuration that decide the preprocessed data."""

    configurations: tuple[str, ...]
    data_identifier: str
    spacing: tuple[float, ...]
    patch_size: tuple[int, ...]
    normalization_schemes: tuple[str, ...]
    use_mask_for_norm: tuple[bool, ...]
    data_kwargs: tuple[tuple[str, Any], ...]
    seg_kwargs: tuple[tuple[str, Any], ...]

    def key(self) -> tuple[Any, ...]:
        """Everything but the configuration names: equal keys mean equal data."""
        return dataclasses.astuple(dataclasses.replace(self, configurations=()))


def preprocessing_config(plans: Plans, name: str) -> PreprocessingConfig:
    conf = plans.configuration(name)
    missing = [k for k in REQUIRED_KEYS if not conf.has(k)]
    if missing:
        msg = f"{conf.where}: missing {', '.join(missing)}"
        raise ConfigurationError(msg)
    return PreprocessingConfig(
        configurations=(name,),
        data_identifier=conf.data_identifier,
        spacing=conf.spacing,
        patch_size=conf.patch_size,
        normalization_schemes=conf.normalization_schemes,
        use_mask_for_norm=conf.use_mask_for_norm,
        data_kwargs=tuple(sorted(resampling_kwargs(conf, "data").items())),
        seg_kwargs=tuple(sorted(resampling_kwargs(conf, "seg").items())),
    )


def group_by_identifier(plans: Plans, names: Sequence[str]) -> list[PreprocessingConfig]:
    """One entry per data identifier; configurations sharing one must agree on the data."""
    groups = []
    for members in plans.data_identifier_groups(list(names)).values():
        first = preprocessing_config(plans, members[0])
        for other in members[1:]:
            if preprocessing_config(plans, other).key() != first.key():
                msg = (
                    f"configurations {members[0]} and {other} share data_identifier "
                    f"{first.data_identifier} but differ in spacing, patch size, normalization or "
                    "resampling"
                )
                raise ConfigurationError(msg)
        groups.append(dataclasses.replace(first, configurations=tuple(members)))
    return groups


def config_sha256(plans: Plans, config: PreprocessingConfig) -> str:
    """Hash of what decides the data: the configuration plus the plans-level inputs it uses."""
    raw = plans.raw
    content = {
        "key": repr(config.key()),
        "transpose_forward": raw.get("transpose_forward"),
        "intensity": raw.get("foreground_intensity_properties_per_channel"),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
