"""Writes upstream's outputs for tests/unit/training/test_cascade_augmentation.py (run once, in
the peer venv).

    ~/.cache/nnunet-peer/venv/bin/python tests/data/cascade_augmentation/make_upstream_reference.py

Inputs are built here from a fixed numpy seed; every output comes from batchgeneratorsv2's own
transforms and operator functions (nnU-Net 2.8.1's pinned version), with the random choices passed
in explicitly, so the test can replay the same choices through our code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from batchgeneratorsv2.transforms.nnunet import random_binary_operator as rbo
from batchgeneratorsv2.transforms.nnunet.seg_to_onehot import MoveSegAsOneHotToDataTransform
from scipy import ndimage as ndi
from skimage.morphology import ball, disk

OUT = Path(__file__).resolve().parent
OPERATORS = {  # upstream's default any_of_these, in its order
    "dilation": rbo.binary_dilation_torch,
    "erosion": rbo.binary_erosion_torch,
    "closing": rbo.binary_closing_torch,
    "opening": rbo.binary_opening_torch,
}
RADII = (1.0, 1.5, 2.0, 2.7, 3.3, 4.6, 7.9)  # integer and fractional, odd and even strel sizes


def label_map(shape: tuple[int, ...], n_labels: int, seed: int) -> np.ndarray:
    """Smooth random label map 0..n_labels-1 with blobs touching the border."""
    rng = np.random.default_rng(seed)
    field = ndi.gaussian_filter(rng.standard_normal(shape), 1.5)
    cuts = np.quantile(field, np.linspace(0, 1, n_labels + 1)[1:-1])
    return np.digitize(field, cuts).astype(np.int16)


def one_hot_case() -> None:
    rng = np.random.default_rng(0)
    shape = (10, 12, 14)
    data = rng.standard_normal((2, *shape)).astype(np.float32)
    seg = np.stack([label_map(shape, 4, 1), label_map(shape, 5, 2)])  # channel 1: labels 0..4
    labels = [1, 2, 4]  # label 3 present in seg but not foreground: must not appear
    out = MoveSegAsOneHotToDataTransform(1, labels)(
        image=torch.from_numpy(data.copy()), segmentation=torch.from_numpy(seg.copy())
    )
    np.savez_compressed(
        OUT / "one_hot.npz",
        data=data,
        seg=seg,
        labels=np.array(labels),
        out_data=out["image"].numpy(),
        out_seg=out["segmentation"].numpy(),
    )


def operator_case() -> None:
    arrays = {}
    masks = {"3d": label_map((14, 16, 18), 3, 3) == 1, "2d": label_map((30, 34), 3, 4) == 2}
    for dim, mask in masks.items():
        arrays[f"mask_{dim}"] = mask
        for radius in RADII:
            strel = disk(radius, dtype=bool) if mask.ndim == 2 else ball(radius, dtype=bool)
            for name, op in OPERATORS.items():
                result = op(torch.from_numpy(mask.copy()), torch.from_numpy(strel))
                arrays[f"{dim}_{name}_{radius}"] = result.numpy()
    np.savez_compressed(OUT / "operators.npz", radii=np.array(RADII), **arrays)


def multi_label_case() -> None:
    """The whole transform's apply step on a one-hot image, with fixed per-label choices."""
    seg = label_map((12, 14, 16), 4, 5)
    image = np.stack([np.zeros(seg.shape), *((seg == lab) for lab in (1, 2, 3))]).astype(np.float32)
    channels = [-3, -2, -1]
    plan = [(-2, "dilation", 2.5), (-1, "closing", 1.5), (-3, "dilation", 3.0)]
    tr = rbo.ApplyRandomBinaryOperatorTransform(channel_idx=channels)
    out = tr._apply_to_image(
        torch.from_numpy(image.copy()),
        apply_to_channels=[c for c, _, _ in plan],
        operators=[OPERATORS[name] for _, name, _ in plan],
        strel_size=[r for _, _, r in plan],
    )
    np.savez_compressed(
        OUT / "multi_label.npz",
        image=image,
        channels=np.array([c for c, _, _ in plan]),
        operators=np.array([list(OPERATORS).index(name) for _, name, _ in plan]),
        radii=np.array([r for _, _, r in plan]),
        out=out.numpy(),
    )


if __name__ == "__main__":
    one_hot_case()
    operator_case()
    multi_label_case()
