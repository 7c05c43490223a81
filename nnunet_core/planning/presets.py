"""Planner presets: what differs between upstream's planner classes (default, ResEnc M/L/XL).

Each preset names its upstream class (``-pl`` accepts either name), its plans name, its network
and the VRAM reference numbers its batch and patch sizes are scaled by.
"""

from __future__ import annotations

from dataclasses import dataclass

from nnunet_core.errors import ConfigurationError


@dataclass(frozen=True)
class PlannerPreset:
    """Everything that differs between upstream's planner classes."""

    planner_name: str  # written as experiment_planner_used
    plans_name: str
    network: str  # PlainConvUNet | ResidualEncoderUNet
    reference_3d: int
    reference_2d: int
    reference_gb: float
    max_dataset_covered: float
    blocks_encoder: tuple[int, ...]
    blocks_decoder: tuple[int, ...]

    @property
    def residual(self) -> bool:
        return self.network == "ResidualEncoderUNet"

    def too_large(self, estimate: int, reference: float, ref_bs: int) -> bool:
        """Upstream's shrink condition: the plain planner corrects for its reference batch size."""
        if self.residual:
            return estimate > reference
        return estimate / ref_bs * 2 > reference


_PLAIN = ("PlainConvUNet", (2,) * 14, (2,) * 13)
_RESENC = ("ResidualEncoderUNet", (1, 3, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6), (1,) * 13)
# fmt: off
# key: (upstream planner class, plans name, network, ref 3d, ref 2d, GB, max_dataset_covered)
_TABLE = {
    "default": ("ExperimentPlanner", "nnUNetPlans", _PLAIN, 560_000_000, 85_000_000, 8, 0.05),
    "ResEnc": ("ResEncUNetPlanner", "nnUNetResEncUNetPlans", _RESENC,
               680_000_000, 135_000_000, 8, 0.05),
    "ResEncM": ("nnUNetPlannerResEncM", "nnUNetResEncUNetMPlans", _RESENC,
                680_000_000, 135_000_000, 8, 1),
    "ResEncL": ("nnUNetPlannerResEncL", "nnUNetResEncUNetLPlans", _RESENC,
                2_100_000_000, 380_000_000, 24, 1),
    "ResEncXL": ("nnUNetPlannerResEncXL", "nnUNetResEncUNetXLPlans", _RESENC,
                 3_600_000_000, 560_000_000, 40, 1),
}
# fmt: on
PRESETS: dict[str, PlannerPreset] = {
    key: PlannerPreset(cls, plans, net[0], r3, r2, gb, cov, net[1], net[2])
    for key, (cls, plans, net, r3, r2, gb, cov) in _TABLE.items()
}


def get_preset(name: str) -> PlannerPreset:
    """A preset by our short name or by upstream's planner class name (``-pl``)."""
    for key, preset in PRESETS.items():
        if name in (key, preset.planner_name):
            return preset
    names = ", ".join(f"{key} ({p.planner_name})" for key, p in PRESETS.items())
    msg = f"unknown planner {name!r}; choose one of {names}"
    raise ConfigurationError(msg)
