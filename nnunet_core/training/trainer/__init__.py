"""The trainer: the loop of one fold's epochs, its settings, the ``-tr`` names and their lookup.

- ``loop``: ``Trainer``, the public base class of users' trainers, and its hooks
- ``settings``: ``TrainerSettings``, the schedule and run options a fold starts with
- ``variants``: upstream's trainer names (``nnUNetTrainer_250epochs``, ...) as settings
- ``lookup``: a ``-tr`` name to its class (built-in, ``file.py:Class``, ``module:Class``)
- ``log``, ``progress``, ``progress_plot``, ``epoch_timing``: what each epoch records

``from nnunet_core.training.trainer import Trainer`` (the form users' files and models written
before this package existed use) keeps working. The names are loaded on first use, so that
importing ``variants`` or ``lookup`` does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.runtime.lazy_names import lazy_getattr

__all__ = ["FINISHED", "STOPPED", "Trainer", "TrainerSettings"]

if TYPE_CHECKING:
    from nnunet_core.training.trainer.loop import FINISHED, STOPPED, Trainer
    from nnunet_core.training.trainer.settings import TrainerSettings

# name -> module that defines it (loaded lazily by __getattr__)
_NAMES = {
    "FINISHED": "nnunet_core.training.trainer.loop",
    "STOPPED": "nnunet_core.training.trainer.loop",
    "Trainer": "nnunet_core.training.trainer.loop",
    "TrainerSettings": "nnunet_core.training.trainer.settings",
}


__getattr__ = lazy_getattr(__name__, _NAMES)
