"""Weights & Biases: one run per fold attempt, in a project (upstream's ``nnunet`` by default).

``WANDB_MODE=offline`` (or ``mode: offline``) writes the run under ``wandb/`` of the fold's
folder without network; ``wandb sync`` uploads it later. The run's config is the fold's
settings, its summary the final validation metrics and ``model_folder`` (a ``file://`` URI,
nothing uploaded). ``wandb`` is imported here only, when this back-end is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnunet_core.tracking.flat import flat_settings


class WandbTracker:
    def __init__(
        self, project: str | None, mode: str | None, tags: Mapping[str, str], folder: Path
    ) -> None:
        import wandb

        self.wandb = wandb
        self.project = project
        self.mode = mode
        self.tags = dict(tags)
        self.folder = folder
        self.run: Any = None

    def start_fold(self, name: str, settings: Mapping[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.run = self.wandb.init(
            project=self.project or str(settings.get("dataset") or "nnunet"),
            name=name,
            dir=str(self.folder),
            mode=self.mode,
            config=flat_settings(settings),
            tags=[f"{key}:{value}" for key, value in self.tags.items()][:64],
            reinit="create_new",
        )

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        if self.run is not None:
            self.run.log(dict(metrics), step=epoch)

    def end_fold(self, metrics: Mapping[str, float], model_folder: Path, status: str) -> None:
        if self.run is None:
            return
        self.run.summary.update(dict(metrics))
        self.run.summary["model_folder"] = model_folder.absolute().as_uri()
        self.run.summary["status"] = status
        self.run.finish(exit_code=0 if status == "finished" else 1)
        self.wandb.teardown()  # waits until W&B's service has written the run (offline: all of it)
