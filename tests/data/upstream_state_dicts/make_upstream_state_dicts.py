"""Upstream's state-dict layout for a few plans, stored for tests/parity/test_upstream_names.py.

Run with the peer venv (nnunetv2 2.8.1 + dynamic_network_architectures), from the repository
root: ``$PEER/venv/bin/python tests/data/upstream_state_dicts/make_upstream_state_dicts.py``.
For each case it builds upstream's network from the plans (as its trainer does, deep supervision
on) and writes the state-dict keys with their shapes and the order of the named parameters.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from nnunetv2.utilities.get_network_from_plans import get_network_from_plans

HERE = Path(__file__).resolve().parent
PLANS = HERE.parent / "plans"
# name -> (plans file, configuration, input channels, outputs, arch_kwargs changes)
CASES = {
    "plain_3d": ("a_Dataset901_IsoCT/nnUNetPlans.json", "3d_fullres", 1, 3, {}),
    "plain_2d": ("a_Dataset901_IsoCT/nnUNetPlans.json", "2d", 2, 4, {}),
    "resenc_3d": ("a_Dataset901_IsoCT/nnUNetResEncUNetMPlans.json", "3d_fullres", 1, 3, {}),
    # small widths: the cross tests run these networks forward on both sides
    "plain_3d_small": (
        "a_Dataset901_IsoCT/nnUNetPlans.json",
        "3d_fullres",
        1,
        3,
        {"features_per_stage": [4, 8, 16, 16, 16, 16]},
    ),
    "resenc_2d_dropout": (
        "b_Dataset902_AnisoMRI/nnUNetResEncUNetMPlans.json",
        "2d",
        1,
        2,
        {
            "features_per_stage": [8, 16, 16, 16, 16, 16, 16],
            "dropout_op": "torch.nn.modules.dropout.Dropout2d",
            "dropout_op_kwargs": {"p": 0.2},
        },
    ),
}


def configuration(plans: dict, name: str) -> dict:
    """The configuration with inherited keys resolved (``inherits_from``)."""
    config = dict(plans["configurations"][name])
    parent = config.pop("inherits_from", None)
    return {**configuration(plans, parent), **config} if parent else config


def main() -> None:
    for name, (plans_file, config_name, channels, outputs, changes) in CASES.items():
        plans = json.loads((PLANS / plans_file).read_text())
        architecture = configuration(plans, config_name)["architecture"]
        kwargs = {**architecture["arch_kwargs"], **changes}
        network = get_network_from_plans(
            architecture["network_class_name"],
            kwargs,
            architecture["_kw_requires_import"],
            channels,
            outputs,
            allow_init=True,
            deep_supervision=True,
        )
        record = {
            "plans_file": plans_file,
            "configuration": config_name,
            "arch_kwargs_changes": changes,
            "num_input_channels": channels,
            "num_outputs": outputs,
            "state_dict": {k: list(v.shape) for k, v in network.state_dict().items()},
            "named_parameters": [k for k, _ in network.named_parameters()],
            "num_parameters": sum(p.numel() for p in network.parameters()),
        }
        (HERE / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(name, len(record["state_dict"]), "keys", record["num_parameters"], "parameters")


if __name__ == "__main__":
    sys.exit(main())
