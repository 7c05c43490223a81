"""Upstream's training steps on a fixed batch, stored for tests/parity/test_train_step_parity.py.

    ~/.cache/nnunet-peer/venv/bin/python tests/data/train_step/make_upstream_train_step.py

Upstream's own trainer (nnU-Net 2.8.1 ``nnUNetTrainer``: ``initialize`` builds network, loss and
optimizer; ``train_step`` does forward, loss, backward, clipping and the SGD step) on two
configurations of the cascade test plans: ``3d_cascade_fullres`` (image + one-hot previous stage
= 3 input channels, batch Dice) and ``3d_lowres`` (one channel, per-sample Dice, a lesion-free
sample), both with deep supervision and narrower stages so that the stored figures stay small.
Weights and batches come from closed formulas (``train_step_inputs``), so our test rebuilds them
without storing tensors. Written per configuration: each parameter's shape, the loss of each step
and, after the last, each parameter's sum and sum of squares, under upstream's names and in its
order.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from train_step_inputs import (  # noqa: E402
    CONFIGURATIONS,
    FEATURES,
    STEPS,
    batch,
    expected_file,
    narrow_plans,
    set_formula_weights,
)

PLANS = HERE.parent / "cascade" / "plans.json"
DATASET_JSON = HERE.parent / "cascade" / "dataset.json"


def upstream_steps(configuration: str) -> None:
    """Upstream's STEPS training steps on ``configuration``, written to its expected file."""
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    plans = narrow_plans(json.loads(PLANS.read_text()), configuration)
    plans["continue_training"] = False  # the 2.8.1 trainer pops this key
    dataset_json = json.loads(DATASET_JSON.read_text())
    trainer = nnUNetTrainer(plans, configuration, 0, dataset_json, torch.device("cpu"))
    # initialize() only looks at the file endings of the data folder (blosc2 or numpy)
    data_folder = Path(trainer.preprocessed_dataset_folder)
    data_folder.mkdir(parents=True, exist_ok=True)
    (data_folder / "case.b2nd").touch()
    trainer.initialize()
    trainer.lr_scheduler.step(0)
    network = trainer.network
    set_formula_weights(list(network.named_parameters()))
    losses = []
    for step in range(STEPS):
        data, targets = batch(configuration, step)
        losses.append(float(trainer.train_step({"data": data, "target": targets})["loss"]))
    after = {
        name: [float(p.detach().double().sum()), float((p.detach().double() ** 2).sum())]
        for name, p in network.named_parameters()
    }
    record = {
        "configuration": configuration,
        "batch_dice": trainer.configuration_manager.batch_dice,
        "features_per_stage": FEATURES,
        "input_channels": int(next(network.parameters()).shape[1]),
        "num_parameters": sum(p.numel() for p in network.parameters()),
        "shapes": {name: list(p.shape) for name, p in network.named_parameters()},
        "learning_rate": trainer.optimizer.param_groups[0]["lr"],
        "losses": losses,
        "parameters_after": after,
    }
    expected_file(configuration).write_text(json.dumps(record, indent=1) + "\n")
    print(f"{configuration}: losses {losses}; {record['num_parameters']} parameters")


def main() -> None:
    for variable in ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results"):
        os.environ[variable] = tempfile.mkdtemp()
    os.environ["nnUNet_compile"] = "false"
    torch.set_num_threads(1)
    for configuration in CONFIGURATIONS:
        upstream_steps(configuration)


if __name__ == "__main__":
    main()
