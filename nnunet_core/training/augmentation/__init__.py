"""Training-time data augmentation matching nnU-Net v2 (batchgeneratorsv2), driven by a numpy
rng."""

from nnunet_core.training.augmentation.cascade import (
    CascadeTraining,
    CascadeValidation,
    apply_random_binary_operator,
    move_seg_as_one_hot,
    remove_random_connected_component,
)
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
    "CascadeTraining",
    "CascadeValidation",
    "SpatialTransform",
    "TrainingTransforms",
    "ValidationTransforms",
    "apply_random_binary_operator",
    "configure_augmentation",
    "initial_patch_size",
    "move_seg_as_one_hot",
    "remove_random_connected_component",
    "training_transforms",
]
