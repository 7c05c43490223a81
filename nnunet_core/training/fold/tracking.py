"""A fold's experiment tracking: opened before the fit, told every epoch by the trainer
(``Trainer.tracker``), closed with the final validation metrics and the model folder.

Only the main process tracks, and never ``--val`` (it trains nothing). A tracker that fails says
so in one line of the training log and stderr, then stays quiet (``nnunet_core.tracking``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from nnunet_core.tracking import NO_TRACKER, Tracker, open_tracker, validation_metrics
from nnunet_core.training.fold import changes as fold_changes

if TYPE_CHECKING:
    from nnunet_core.training.fold.run import FoldRequest
    from nnunet_core.training.trainer.loop import Trainer


def start_tracking(request: FoldRequest, trainer: Trainer) -> Tracker:
    """The fold's tracker, its run started with the fold's settings; also ``trainer.tracker``."""
    if not request.topology.is_main or request.tracking.backend == "none":
        return NO_TRACKER
    setup = trainer.setup

    def warn(line: str) -> None:
        trainer.log(line)
        print(f"nnunet-core train: {line}", file=sys.stderr, flush=True)

    tracker = open_tracker(
        request.tracking, warn, request.roots.require_results(), setup.output_folder
    )
    settings = {
        "dataset": request.dataset,
        "trainer": request.settings.trainer_name,
        **fold_changes.settings_of_fold(request, setup),
    }
    name = f"{request.dataset} {request.configuration} fold {request.fold}"
    tracker.start_fold(name, settings)
    trainer.tracker = tracker
    return tracker


def end_tracking(
    tracker: Tracker, trainer: Trainer, summary: dict[str, Any] | None, status: str
) -> None:
    """The final validation metrics (none when the fit stopped or failed) and the model folder
    (the configuration's, which holds the folds, plans and dataset.json)."""
    tracker.end_fold(validation_metrics(summary), trainer.setup.output_folder.parent, status)
