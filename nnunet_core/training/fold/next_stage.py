"""The cascade's handover: a 3d_lowres fold's validation segmentations for the next stage.

The cascade's full-resolution stage trains on the low-resolution stage's predictions of cases it
never saw in training, so every cross-validation fold of ``3d_lowres`` writes its validation cases
to ``<model folder>/predicted_next_stage/<next configuration>/<case>.b2nd``; together the folds
cover the training set. As upstream's ``resample_and_save`` (called by its final validation):

- the target is the next stage's preprocessed shape of the case (read from its preprocessed
  ``.b2nd`` when it exists, else computed from the case's properties as preprocessing does);
- the logits are resampled with *this* configuration's probability resampling, with its spacing
  as both the current and the target spacing (that only decides the separate-z path);
  float16 logits (upstream's sliding window) are stored as float16 after resampling; the
  resampling runs in slabs (``inference.resample_slabs``), so no class is held at full size;
- argmax (labels) or regions, stored 3-D (no channel axis) as uint8 (uint16 from 255 foreground
  labels on), chunked for the producing configuration's patch size, written atomically.

Unlike upstream, fold ``all`` writes none: it validates on its own training cases, and its
predictions would silently replace the held-out ones of the cross-validation folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nnunet_core.inference.export import (
    logits_to_segmentation,
    probability_resampling_plan,
    resample_probabilities,
)
from nnunet_core.inference.resample_slabs import resampled_slabs, rounded_to_float16
from nnunet_core.io.blosc2_store import DATA_SUFFIX, comp_blosc2_params, open_array, save_array
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.results import next_stage_file
from nnunet_core.preprocessing.resampling import compute_new_shape

NOT_A_SOURCE_FOLD = "all"


def exports_next_stage(configuration: Configuration, fold: int | str) -> bool:
    """A cross-validation fold of a configuration with a next stage (fold 'all' is not one)."""
    return bool(configuration.next_stage) and str(fold) != NOT_A_SOURCE_FOLD


def segmentation_dtype(label_spec: LabelSpec) -> type:
    """Upstream's rule for next-stage files: uint8 below 255 foreground labels, else uint16."""
    return np.uint8 if len(label_spec.foreground_labels) < 255 else np.uint16


def _spacing_in_network_order(
    properties: dict[str, Any], plans: Plans, spacing: Sequence[float]
) -> list[float]:
    """A configuration's spacing over all axes (2-D: the case's own slice spacing first)."""
    shape = properties["shape_after_cropping_and_before_resampling"]
    if len(spacing) >= len(shape):
        return [float(s) for s in spacing]
    return [float(properties["spacing"][plans.transpose_forward[0]]), *(float(s) for s in spacing)]


def computed_next_stage_shape(
    properties: dict[str, Any], plans: Plans, next_configuration: Configuration
) -> tuple[int, ...]:
    """The case's shape after the next stage's resampling (what its preprocessing writes)."""
    shape = [int(s) for s in properties["shape_after_cropping_and_before_resampling"]]
    original = [float(properties["spacing"][a]) for a in plans.transpose_forward]
    target = _spacing_in_network_order(properties, plans, next_configuration.spacing)
    return compute_new_shape(shape, original, target)


def next_stage_shape(
    properties: dict[str, Any],
    plans: Plans,
    next_configuration: Configuration,
    preprocessed_dir: Path,
    case_id: str,
) -> tuple[int, ...]:
    """The next stage's preprocessed shape: its stored case if preprocessed, else computed."""
    stored = preprocessed_dir / next_configuration.data_identifier / f"{case_id}{DATA_SUFFIX}"
    if stored.is_file():
        return tuple(int(s) for s in open_array(stored).shape[1:])
    return computed_next_stage_shape(properties, plans, next_configuration)


def resample_logits_to_shape(
    logits: torch.Tensor | np.ndarray,
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    target_shape: Sequence[int],
    where: str = "next stage",
) -> np.ndarray:
    """``(C, *target_shape)`` logits in the input's dtype (float16 stays float16, as upstream)."""
    if isinstance(logits, torch.Tensor):
        logits = logits.detach().cpu().numpy()
    half = logits.dtype == np.float16
    array = np.asarray(logits, dtype=np.float64 if half else np.float32)
    spacing = _spacing_in_network_order(properties, plans, configuration.spacing)
    resampled = resample_probabilities(array, target_shape, spacing, spacing, configuration, where)
    return resampled.astype(np.float16) if half else resampled


def next_stage_segmentation(
    logits: torch.Tensor | np.ndarray,
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    label_spec: LabelSpec,
    target_shape: Sequence[int],
    where: str = "next stage",
) -> np.ndarray:
    """The 3-D segmentation (uint8/uint16) the next stage reads, from this stage's logits."""
    half = str(logits.dtype).endswith("float16")  # a torch or a numpy array
    spacing = _spacing_in_network_order(properties, plans, configuration.spacing)
    plan, kwargs = probability_resampling_plan(configuration, target_shape, spacing, spacing, where)
    segmentation = np.zeros(plan.new_shape, dtype=segmentation_dtype(label_spec))
    # slab by slab: no class is held at the next stage's (full) size
    for first, slab in resampled_slabs(logits, plan, kwargs["order"], kwargs["order_z"]):
        if half:  # upstream stores the resampled float16 logits as float16 before the argmax
            slab = rounded_to_float16(slab)
        rows = logits_to_segmentation(slab.numpy(), label_spec)
        segmentation[first : first + slab.shape[1]] = rows
    return segmentation


def save_next_stage(
    segmentation: np.ndarray, path: Path, patch_size: Sequence[int], label_spec: LabelSpec
) -> Path:
    """Write one segmentation atomically, chunked as upstream chunks it (producer's patch)."""
    blocks, chunks = comp_blosc2_params(
        (1, *segmentation.shape), patch_size, np.dtype(segmentation_dtype(label_spec)).itemsize
    )
    save_array(segmentation, path, chunks[1:], blocks[1:])
    return path


def export_next_stage(
    logits: torch.Tensor | np.ndarray,
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    label_spec: LabelSpec,
    model_dir: Path,
    preprocessed_dir: Path,
    case_id: str,
) -> list[Path]:
    """Every next stage's file for one validation case; returns the paths written."""
    written = []
    for name in configuration.next_stage:
        next_configuration = plans.configuration(name)
        shape = next_stage_shape(properties, plans, next_configuration, preprocessed_dir, case_id)
        where = f"case {case_id}: next stage {name}"
        segmentation = next_stage_segmentation(
            logits, properties, plans, configuration, label_spec, shape, where
        )
        path = next_stage_file(model_dir, name, case_id)
        written.append(save_next_stage(segmentation, path, configuration.patch_size, label_spec))
    return written
