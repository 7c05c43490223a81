"""A model folder as training leaves it, made without training: plans.json, dataset.json and
``fold_k/checkpoint_final.pth`` written by the real checkpoint module, with seeded random weights
of a tiny configuration (an override of the synth3d_peer900 plans). Random weights cost what
trained ones do and exercise every step of prediction; tests on it check files, geometry and
errors, not quality."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nnunet_core.io.plans import Plans
from nnunet_core.model import build_network
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.planning.overrides import apply_overrides
from tests.helpers.paths import TEST_DATA

DATASET = "Dataset900_Synth"
PLANS = TEST_DATA / "plans" / "synth3d_peer900" / "nnUNetPlans.json"
TINY_3D = {
    "inherits_from": "3d_fullres",
    "patch_size": [8, 16, 16],
    "architecture": {
        "arch_kwargs": {
            "n_stages": 3,
            "features_per_stage": [4, 8, 16],
            "kernel_sizes": [[1, 3, 3], [3, 3, 3], [3, 3, 3]],
            "strides": [[1, 1, 1], [1, 2, 2], [2, 2, 2]],
            "n_conv_per_stage": [1, 1, 1],
            "n_conv_per_stage_decoder": [1, 1],
        }
    },
}
TINY_2D = {
    "inherits_from": "2d",
    "patch_size": [16, 16],
    "architecture": {
        "arch_kwargs": {
            "n_stages": 2,
            "features_per_stage": [4, 8],
            "kernel_sizes": [[3, 3], [3, 3]],
            "strides": [[1, 1], [2, 2]],
            "n_conv_per_stage": [1, 1],
            "n_conv_per_stage_decoder": [1],
        }
    },
}


def make_model(results: Path, dataset_json: dict, configuration: str, folds: list[int]) -> Path:
    """A model folder as training writes it, with seeded random weights per fold."""
    base = json.loads(PLANS.read_text())
    plans = apply_overrides(base, {"3d_tiny": TINY_3D, "2d_tiny": TINY_2D})
    resolved = Plans(plans).configuration(configuration)
    model_dir = results / DATASET / f"nnUNetTrainer__nnUNetPlans__{configuration}"
    model_dir.mkdir(parents=True)
    (model_dir / "plans.json").write_text(json.dumps(plans))
    (model_dir / "dataset.json").write_text(json.dumps(dataset_json))
    axes = [0, 1, 2] if configuration.startswith("3d") else [0, 1]
    for fold in folds:
        torch.manual_seed(fold)
        network = build_network(resolved, 1, 3, True)
        state = {
            "network_weights": network.state_dict(),
            "init_args": {
                "plans": plans,
                "configuration": configuration,
                "fold": fold,
                "dataset_json": dataset_json,
                "device": "cpu",
            },
            "trainer_name": "nnUNetTrainer",
            "inference_allowed_mirroring_axes": axes,
            "current_epoch": 1,
        }
        ckpt.save_checkpoint(state, model_dir / f"fold_{fold}" / ckpt.FINAL)
    return model_dir
