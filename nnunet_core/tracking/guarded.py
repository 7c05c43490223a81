"""A tracker's failure never fails training: one warning line, then nothing for that fold.

A tracking server that is down, a full disk under ``mlruns``, a package that breaks on import:
the fold trains on. The back-end is built on the first call, so that its failure to start is
caught here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nnunet_core.tracking.base import Tracker


class GuardedTracker:
    """Calls the back-end ``build`` returns until one call raises; then warns once, stops."""

    def __init__(self, backend: str, build: Callable[[], Tracker], warn: Callable[[str], None]):
        self.backend = backend
        self._build = build
        self._warn = warn
        self._tracker: Tracker | None = None
        self.off = False

    def start_fold(self, name: str, settings: Mapping[str, Any]) -> None:
        self._call("start_fold", name, settings)

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        self._call("log_epoch", epoch, metrics)

    def end_fold(self, metrics: Mapping[str, float], model_folder: Path, status: str) -> None:
        self._call("end_fold", metrics, model_folder, status)

    def _call(self, method: str, *args: Any) -> None:
        if self.off:
            return
        try:
            if self._tracker is None:
                self._tracker = self._build()
            getattr(self._tracker, method)(*args)
        except Exception as exc:  # any failure of the tracker, never training's
            self.off = True
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            self._warn(
                f"WARNING: experiment tracking ({self.backend}) failed in {method} and is off "
                f"for this fold, which trains on: {reason}"
            )
