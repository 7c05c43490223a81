"""nnunet_core: nnU-Net v2's self-configuring segmentation method, driven by Snakemake.

The public API is what this module exports: ``from nnunet_core import Trainer`` is the stable
base class of a fold's training, ``Planner`` that of an experiment planner, and the other names
are the types the trainer's hooks take and return (docs/bring-your-own-method.md). They are
loaded on first use, so that ``import nnunet_core`` (and every light command such as
``nnunet-core verify``) does not pay for importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.runtime.lazy_names import lazy_getattr

__version__ = "0.1.0"
__all__ = [
    "Configuration",
    "FoldSetup",
    "Planner",
    "Trainer",
    "TrainerSettings",
    "TrainerVariant",
    "TrainingTransforms",
    "__version__",
]

if TYPE_CHECKING:
    from nnunet_core.io.plans_configuration import Configuration
    from nnunet_core.planning.base import Planner
    from nnunet_core.training.augmentation.pipeline import TrainingTransforms
    from nnunet_core.training.fold.setup import FoldSetup
    from nnunet_core.training.trainer.loop import Trainer
    from nnunet_core.training.trainer.settings import TrainerSettings
    from nnunet_core.training.trainer.variants import TrainerVariant

# name -> module that defines it (loaded lazily by __getattr__)
_PUBLIC = {
    "Configuration": "nnunet_core.io.plans_configuration",
    "FoldSetup": "nnunet_core.training.fold.setup",
    "Planner": "nnunet_core.planning.base",
    "Trainer": "nnunet_core.training.trainer.loop",
    "TrainerSettings": "nnunet_core.training.trainer.settings",
    "TrainerVariant": "nnunet_core.training.trainer.variants",
    "TrainingTransforms": "nnunet_core.training.augmentation.pipeline",
}


__getattr__ = lazy_getattr(__name__, _PUBLIC)
