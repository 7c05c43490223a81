"""Which back-end tracks a fold, where its package is missing, and opening it.

The train command builds a ``TrackingChoice`` from its ``--tracking*`` flags, else from
upstream's switches (``nnUNet_wandb_enabled=1``, ``nnUNet_wandb_project``); the workflow passes
config ``tracking`` as those flags.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.tracking.base import NO_TRACKER, Tracker
from nnunet_core.tracking.guarded import GuardedTracker

NONE, MLFLOW, WANDB = "none", "mlflow", "wandb"
BACKENDS = (NONE, MLFLOW, WANDB)
# upstream 2.8.1's switches (nnunetv2/training/logging/nnunet_logger.py) and its default project
WANDB_ENABLED_ENV, WANDB_PROJECT_ENV, WANDB_DEFAULT_PROJECT = (
    "nnUNet_wandb_enabled",
    "nnUNet_wandb_project",
    "nnunet",
)
MLFLOW_DB = "mlflow.db"  # the embedded store's file (SQLite), beside the results


@dataclass(frozen=True)
class TrackingChoice:
    """A back-end and where it records: ``uri`` (MLflow's tracking URI; None: SQLite in
    ``results``), ``experiment`` (MLflow experiment or W&B project; None: the dataset's
    name, for W&B ``nnUNet_wandb_project`` else upstream's ``nnunet``), ``mode`` (W&B's: online,
    offline; None: ``WANDB_MODE``) and the tags of every run."""

    backend: str = NONE
    uri: str | None = None
    experiment: str | None = None
    mode: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of_command(
        cls,
        backend: str | None,
        uri: str | None = None,
        experiment: str | None = None,
        mode: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> TrackingChoice:
        """The train command's flags; without ``--tracking``, upstream's W&B switches decide."""
        if backend is None:
            enabled = os.environ.get(WANDB_ENABLED_ENV, "0").strip().lower()
            backend = WANDB if enabled in ("1", "true", "yes") else NONE
        if backend == WANDB and experiment is None:
            experiment = os.environ.get(WANDB_PROJECT_ENV) or WANDB_DEFAULT_PROJECT
        return cls(backend, uri, experiment, mode, dict(tags or {}))

    def mlflow_uri(self, results: Path) -> str:
        """The tracking URI; None means the embedded SQLite store in ``results``."""
        return self.uri or embedded_mlflow_uri(results)


def embedded_mlflow_uri(folder: Path) -> str:
    """MLflow's embedded store, no server: the SQLite file ``MLFLOW_DB`` in ``folder``, absolute
    (jobs run in other folders)."""
    return f"sqlite:///{(Path(folder) / MLFLOW_DB).absolute()}"


def missing_package_line(backend: str) -> str | None:
    """One line naming the extra to install when ``backend``'s package is missing, else None."""
    if backend == NONE or importlib.util.find_spec(backend) is not None:
        return None
    return (
        f"tracking backend {backend}: the {backend} package is not installed; install the "
        f"extra: pip install 'nnunet-core[{backend}]' (or make install EXTRAS={backend})"
    )


def check_installed(backend: str) -> None:
    """``missing_package_line`` as a ``ConfigurationError`` (before any job or fold starts)."""
    line = missing_package_line(backend)
    if line is not None:
        raise ConfigurationError(line)


def open_tracker(
    choice: TrackingChoice, warn: Callable[[str], None], results: Path, fold_folder: Path
) -> Tracker:
    """The chosen back-end behind the failure guard (``warn`` says once that tracking is off);
    the tracker that does nothing for ``none``. MLflow's embedded store lies in ``results``,
    W&B's local run folder (``wandb/``) in ``fold_folder``, as upstream's."""
    if choice.backend == NONE:
        return NO_TRACKER
    return GuardedTracker(choice.backend, lambda: _backend(choice, results, fold_folder), warn)


def _backend(choice: TrackingChoice, results: Path, fold_folder: Path) -> Tracker:
    if choice.backend == MLFLOW:
        from nnunet_core.tracking.mlflow_backend import MlflowTracker

        return MlflowTracker(choice.mlflow_uri(results), choice.experiment, choice.tags)
    if choice.backend == WANDB:
        from nnunet_core.tracking.wandb_backend import WandbTracker

        return WandbTracker(choice.experiment, choice.mode, choice.tags, fold_folder)
    msg = f"tracking backend {choice.backend!r}: choose one of {', '.join(BACKENDS)}"
    raise ConfigurationError(msg)
