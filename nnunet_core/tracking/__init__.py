"""Experiment tracking of folds in MLflow or Weights & Biases: optional, off by default.

A fold's training calls one small interface (``Tracker``): ``start_fold`` with the fold's
settings, ``log_epoch`` after every epoch, ``end_fold`` with the final validation metrics and
the model folder. ``open_tracker`` picks the back-end; each back-end imports its package only
when chosen (the extras ``mlflow`` and ``wandb``), and a failing back-end never fails training:
one warning line, then tracking is off for that fold (``guarded``).
"""

from nnunet_core.tracking.base import NO_TRACKER, NoTracker, Tracker
from nnunet_core.tracking.choice import (
    BACKENDS,
    NONE,
    TrackingChoice,
    check_installed,
    missing_package_line,
    open_tracker,
)
from nnunet_core.tracking.metrics import epoch_metrics, validation_metrics

__all__ = [
    "BACKENDS",
    "NONE",
    "NO_TRACKER",
    "NoTracker",
    "Tracker",
    "TrackingChoice",
    "check_installed",
    "epoch_metrics",
    "missing_package_line",
    "open_tracker",
    "validation_metrics",
]
