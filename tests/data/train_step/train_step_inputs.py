"""Weights and batches from closed formulas, the same under upstream's venv and ours.

Imported by ``make_upstream_train_step.py`` (peer venv) and
``tests/parity/test_train_step_parity.py``: no stored tensors and no random generator whose stream
could differ between numpy versions. Two configurations of the cascade test plans: the cascade
stage (batch Dice, image plus one-hot previous stage) and ``3d_lowres`` (per-sample Dice, image
only, its second sample without a lesion, like a lesion-free training case).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

CONFIGURATIONS = ("3d_cascade_fullres", "3d_lowres")
FEATURES = [4, 8, 16]  # narrower than the plans' [32, 64, 128]: small figures, fast steps
STEPS = 3
PATCH = (16, 20, 20)
BATCH_SIZE = 2
LABELS = (1, 2)  # foreground labels: the cascade's one-hot input channels
HERE = Path(__file__).resolve().parent


def expected_file(configuration: str) -> Path:
    """Where upstream's figures for ``configuration`` are stored."""
    return HERE / f"upstream_train_step_{configuration}.json"


def narrow_plans(plans: dict, configuration: str) -> dict:
    """``plans`` with the network that ``configuration`` builds narrowed to FEATURES (the cascade
    stage inherits 3d_fullres's architecture, 3d_lowres has its own)."""
    owner = "3d_fullres" if configuration == "3d_cascade_fullres" else configuration
    plans["configurations"][owner]["architecture"]["arch_kwargs"]["features_per_stage"] = FEATURES
    return plans


def set_formula_weights(named: list[tuple[str, torch.Tensor]]) -> None:
    """Fill each parameter (in upstream's named_parameters order, with upstream's names) with a
    sine pattern: convs about He-scaled, norm scales near 1, biases small."""
    with torch.no_grad():
        for k, (name, tensor) in enumerate(named):
            index = np.arange(tensor.numel(), dtype=np.float64)
            wave = np.sin(0.7 * index + 1.3 * k)
            if tensor.ndim >= 2:
                values = np.sqrt(6.0 / tensor[0].numel()) * wave
            elif name.endswith("weight"):
                values = 1.0 + 0.1 * wave
            else:
                values = 0.05 * wave
            tensor.copy_(torch.from_numpy(values.reshape(tensor.shape)))


def label_map(step: int, lesion_free: tuple[int, ...] = ()) -> np.ndarray:
    """(BATCH_SIZE, *PATCH) labels: an organ ellipsoid (1) holding a lesion (2), moved per
    sample and step; the samples in ``lesion_free`` have the organ only."""
    grid = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in PATCH], indexing="ij")
    maps = []
    for sample in range(BATCH_SIZE):
        shift = 1.5 * np.sin(step + 2.0 * sample + np.arange(3))
        centre = [n / 2 + s for n, s in zip(PATCH, shift, strict=True)]
        r = [(g - c) / (n / 3) for g, c, n in zip(grid, centre, PATCH, strict=True)]
        distance = np.sqrt(sum(x * x for x in r))
        labels = np.where(distance < 1.0, 1, 0)
        if sample not in lesion_free:
            labels[np.sqrt((r[0] - 0.3) ** 2 + r[1] ** 2 + (r[2] + 0.2) ** 2) < 0.35] = 2
        maps.append(labels)
    return np.stack(maps).astype(np.int64)


def batch(configuration: str, step: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """``(data, targets)`` for ``configuration`` and the targets at the two deep-supervision
    scales (full, every second voxel). The cascade stage's data adds the one-hot of a previous
    stage that misses the lesion's rim; 3d_lowres's second sample has no lesion."""
    cascade = configuration == "3d_cascade_fullres"
    labels = label_map(step, () if cascade else (1,))
    grid = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in PATCH], indexing="ij")
    texture = 0.3 * np.sin(0.9 * grid[0] + 0.5 * grid[1] - 0.4 * grid[2] + step)
    channels = [labels.astype(np.float64) + texture[None]]
    if cascade:
        previous = np.where(label_map(step + 7) == 2, 1, labels)  # a shifted lesion, as lowres
        channels += [(previous == label).astype(np.float64) for label in LABELS]
    data = np.stack(channels, axis=1).astype(np.float32)
    target = torch.from_numpy(labels[:, None].astype(np.float32))
    return torch.from_numpy(data), [target, target[:, :, ::2, ::2, ::2].contiguous()]
