"""A fold's training and validation batch makers, from its setup and the trainer's choices.

Both read the fold's cases from its preprocessed folder; a cascade stage's stores also open the
previous stage's segmentations, and both pipelines then end with upstream's cascade steps (the
previous stage becomes one-hot input channels; perturbed in training only).

``$NNUNET_SLOW_BATCH_SECONDS`` (tests only) makes every training batch that much slower to build,
in the data worker like a heavy augmentation would be: the suite starves a fold on purpose to
check that the data-wait warning fires (a CPU-only machine cannot make augmentation reliably
slower than its own CPU training step otherwise).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.augmentation import (
    AugmentationConfig,
    TrainingTransforms,
    ValidationTransforms,
    training_transforms,
)
from nnunet_core.training.data.case_store import CaseStore
from nnunet_core.training.data.patch_loader import PatchLoader, validation_loader
from nnunet_core.training.distributed import RankBatch
from nnunet_core.training.fold.setup import FoldSetup


def cascade_labels(setup: FoldSetup) -> list[int] | None:
    """The foreground labels one-hot encoded for a cascade stage; None for other stages."""
    if setup.previous_stage_folder is None:
        return None
    return list(setup.label_spec.foreground_labels)


def fold_stores(setup: FoldSetup) -> tuple[CaseStore, CaseStore]:
    """The training and validation cases (with their previous-stage files for a cascade)."""
    folder, previous = setup.data_folder, setup.previous_stage_folder
    return (
        CaseStore(folder, setup.train_keys, previous_stage_folder=previous),
        CaseStore(folder, setup.val_keys, previous_stage_folder=previous),
    )


SLOW_BATCH_ENV = "NNUNET_SLOW_BATCH_SECONDS"


class SlowBatches:
    """A loader whose batches take ``seconds`` longer (a plain object, so it pickles for spawn)."""

    def __init__(self, loader: PatchLoader, seconds: float) -> None:
        self.loader = loader
        self.seconds = seconds

    def __call__(self, epoch: int, iteration: int) -> Any:
        time.sleep(self.seconds)
        return self.loader(epoch, iteration)


def slow_batch_seconds() -> float:
    """``$NNUNET_SLOW_BATCH_SECONDS`` (0 when unset)."""
    value = os.environ.get(SLOW_BATCH_ENV, "").strip()
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        msg = f"{SLOW_BATCH_ENV} must be a number of seconds >= 0, got {value!r}"
        raise ConfigurationError(msg)
    return seconds


def fold_loaders(
    setup: FoldSetup,
    augmentation: AugmentationConfig,
    patch_size: Sequence[int],
    mirror_axes: Sequence[int] | None,
    share: RankBatch,
    seed: int,
    ds_scales: Sequence[Sequence[float]] | None,
    transform_hook: Callable[[TrainingTransforms], Any] | None = None,
) -> tuple[PatchLoader | SlowBatches, PatchLoader]:
    """``(training, validation)`` loaders of this rank's share of the global batch;
    ``transform_hook`` gets our training transform and returns the one to use (a trainer's)."""
    mask_channels = [i for i, m in enumerate(setup.configuration.use_mask_for_norm) if m]
    labels = cascade_labels(setup)
    transform = training_transforms(
        patch_size,
        augmentation.rotation,
        augmentation.do_dummy_2d,
        mirror_axes,
        mask_channels,
        cascade_labels=labels,
    )
    if transform_hook is not None:
        transform = transform_hook(transform)
    train_store, val_store = fold_stores(setup)
    train = PatchLoader(
        train_store,
        share.size,
        patch_size,
        augmentation.initial_patch_size,
        seed=seed,
        fold=setup.fold,
        transform=transform,
        ds_scales=ds_scales,
        forced_positions=share.forced,
        sample_offset=share.offset,
    )
    val = validation_loader(
        val_store,
        share.size,
        patch_size,
        seed=seed,
        fold=setup.fold,
        forced_positions=share.forced,
        sample_offset=share.offset,
        ds_scales=ds_scales,
        transform=None if labels is None else ValidationTransforms(labels),
    )
    delay = slow_batch_seconds()
    return (SlowBatches(train, delay) if delay else train), val
