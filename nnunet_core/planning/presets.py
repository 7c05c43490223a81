"""Upstream's planner classes (default, ResEnc M/L/XL) as subclasses of ``Planner``.

Each is named as upstream names it (``-pl`` takes that name or our short key), writes its plans
under upstream's plans name, and differs from the default only in its network and the memory
numbers its patch and batch sizes are scaled by.
"""

from __future__ import annotations

from typing import ClassVar

from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.base import FULLRES, Planner
from nnunet_core.planning.plan_parts import DEFAULT_DATA_PLANS, RESENC_UNET


class ExperimentPlanner(Planner):
    """Upstream's default planner: a plain U-Net, 8 GB."""

    plans_name: ClassVar[str | None] = "nnUNetPlans"


class ResEncUNetPlanner(Planner):
    """Upstream's residual encoder U-Net planner (the ResEnc presets' base)."""

    plans_name: ClassVar[str | None] = "nnUNetResEncUNetPlans"
    network: ClassVar[str] = RESENC_UNET
    blocks_encoder: ClassVar[tuple[int, ...]] = (1, 3, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6)
    blocks_decoder: ClassVar[tuple[int, ...]] = (1,) * 13
    reference_3d: ClassVar[int] = 680_000_000
    reference_2d: ClassVar[int] = 135_000_000

    def too_large(self, estimate: int, target: float, dim: int) -> bool:  # noqa: ARG002
        return estimate > target

    def data_identifier(self, configuration: str) -> str:
        """Upstream's ResEnc planners reuse the default planner's 2d / 3d_fullres data
        (``nnUNetPlans_2d``) whatever their plans name. A subclass of one of them may change the
        spacing, so its data is named after its own plans."""
        if type(self) in PRESETS.values() and configuration in ("2d", FULLRES):
            return f"{DEFAULT_DATA_PLANS}_{configuration}"
        return super().data_identifier(configuration)


# The presets by size: (3-D, 2-D) feature-map references for the GPU memory in GB.
class nnUNetPlannerResEncM(ResEncUNetPlanner):  # noqa: N801 - upstream's class name
    plans_name, max_dataset_covered = "nnUNetResEncUNetMPlans", 1


class nnUNetPlannerResEncL(ResEncUNetPlanner):  # noqa: N801 - upstream's class name
    plans_name, max_dataset_covered = "nnUNetResEncUNetLPlans", 1
    reference_3d, reference_2d, reference_gb = 2_100_000_000, 380_000_000, 24


class nnUNetPlannerResEncXL(ResEncUNetPlanner):  # noqa: N801 - upstream's class name
    plans_name, max_dataset_covered = "nnUNetResEncUNetXLPlans", 1
    reference_3d, reference_2d, reference_gb = 3_600_000_000, 560_000_000, 40


# our short name -> upstream's class
PRESETS: dict[str, type[Planner]] = {
    "default": ExperimentPlanner,
    "ResEnc": ResEncUNetPlanner,
    "ResEncM": nnUNetPlannerResEncM,
    "ResEncL": nnUNetPlannerResEncL,
    "ResEncXL": nnUNetPlannerResEncXL,
}


def find_preset(name: str) -> type[Planner] | None:
    """The preset class by our short name or upstream's class name; None for another name."""
    for key, cls in PRESETS.items():
        if name in (key, cls.__name__):
            return cls
    return None


def preset_names() -> str:
    """``default (ExperimentPlanner), ResEnc (ResEncUNetPlanner), ...`` for messages and help."""
    return ", ".join(f"{key} ({cls.__name__})" for key, cls in PRESETS.items())


def get_preset(name: str) -> type[Planner]:
    """A preset by our short name or by upstream's planner class name (``-pl``)."""
    found = find_preset(name)
    if found is None:
        msg = f"unknown planner {name!r}; choose one of {preset_names()}"
        raise ConfigurationError(msg)
    return found
