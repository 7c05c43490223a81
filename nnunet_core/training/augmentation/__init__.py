"""Training-time data augmentation matching nnU-Net v2 (batchgeneratorsv2), driven by a numpy
rng."""

from nnunet_core.training.augmentation.pipeline import (
    ANISO_THRESHOLD,
    AugmentationConfig,
    TrainingTransforms,
    ValidationTransforms,
    configure_augmentation,
    initial_patch_size,
    training_transforms,
)
from nnunet_core.training.augmentation.spatial import SpatialTransform

__all__ = [
    "ANISO_THRESHOLD",
    "AugmentationConfig",
    "SpatialTransform",
    "TrainingTransforms",
    "ValidationTransforms",
    "configure_augmentation",
    "initial_patch_size",
    "training_transforms",
]
