"""Our trainer on random batches of a plan's batch and patch size: no dataset needed.

The train-step speed benchmark (speed/train_step.py) and the GPU check (gpu/) both time
``Trainer.train_step`` this way.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from nnunet_core import Trainer, TrainerSettings
from nnunet_core.io.dataset_json import parse_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.training.deep_supervision import downsample_targets
from nnunet_core.training.fold.setup import FoldSetup

LABELS = {"background": 0, "organ": 1, "lesion": 2}


def make_trainer(plans: dict, configuration: str, device: torch.device, folder: Path) -> Trainer:
    """The trainer of one fold, wired to no data (only ``train_step`` is called)."""
    plans_view = Plans(plans)
    resolved = plans_view.configuration(configuration)
    channels = len(resolved.normalization_schemes)
    content = {
        "channel_names": {str(c): f"ch{c}" for c in range(channels)},
        "labels": LABELS,
        "numTraining": 1,
        "file_ending": ".nii.gz",
    }
    dataset_json = parse_dataset_json(content)
    setup = FoldSetup(
        plans=plans_view,
        configuration_name=configuration,
        configuration=resolved,
        dataset_json=content,
        label_spec=dataset_json.label_spec,
        num_input_channels=channels,
        fold=0,
        data_folder=folder / "data",
        gt_folder=folder / "gt",
        output_folder=folder / configuration,
        train_keys=[],
        val_keys=[],
    )
    return Trainer(setup, TrainerSettings(), device)


def random_batch(trainer: Trainer, generator: torch.Generator) -> dict:
    """Data and labels of the plan's batch and patch size, DS targets as the loader makes them."""
    shape = (trainer.batch_size, *trainer.patch_size)
    channels = trainer.setup.num_input_channels
    data = torch.randn((shape[0], channels, *shape[1:]), generator=generator)
    heads = trainer.setup.label_spec.num_segmentation_heads
    seg = torch.randint(0, heads, (shape[0], 1, *shape[1:]), generator=generator).to(torch.int16)
    return {"data": data, "target": downsample_targets(seg, trainer.ds_scales), "keys": []}


def time_ours(trainer: Trainer, iterations: int, warmup: int) -> dict:
    batch = random_batch(trainer, torch.Generator().manual_seed(0))
    trainer.model.train()
    times = []
    for i in range(warmup + iterations):
        start = time.perf_counter()
        trainer.train_step(batch)
        if trainer.device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return {"median": statistics.median(times), "all": [round(t, 3) for t in times]}
