"""The interface a fold's training calls, and the tracker that records nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Tracker(Protocol):
    """What one fold's training reports to an experiment tracker (main process only)."""

    def start_fold(self, name: str, settings: Mapping[str, Any]) -> None:
        """A run named ``name`` opens with the fold's settings (its settings table's values)."""

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        """One epoch's numbers, at step ``epoch``."""

    def end_fold(self, metrics: Mapping[str, float], model_folder: Path, status: str) -> None:
        """The final validation metrics (empty when none ran), the model folder as a reference
        (its path, nothing uploaded), and how the attempt ended (finished, stopped, failed)."""


class NoTracker:
    """``tracking.backend: none``: every call does nothing."""

    def start_fold(self, name: str, settings: Mapping[str, Any]) -> None:
        pass

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        pass

    def end_fold(self, metrics: Mapping[str, float], model_folder: Path, status: str) -> None:
        pass


NO_TRACKER = NoTracker()
