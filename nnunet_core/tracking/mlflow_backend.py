"""MLflow: one run per fold attempt, in an experiment of the tracking URI's store.

Without a tracking URI the store is embedded: an SQLite file beside the results (no server);
``mlflow ui --backend-store-uri sqlite:///.../mlflow.db`` shows it. Metrics are logged with the
epoch as their step; the model folder is a tag (``model_folder``: its ``file://`` URI), nothing
is uploaded. ``mlflow`` is imported here only, when this back-end is chosen.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nnunet_core.tracking.flat import flat_settings

# A server that cannot be reached: MLflow's own defaults retry for ~4 minutes before the fold
# may train on; these fail within seconds. A user's MLFLOW_HTTP_REQUEST_* settings win.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}
SQLITE = "sqlite:///"
BATCH = 100  # MLflow's log_batch takes at most 100 parameters at once
STATUS = {"finished": "FINISHED", "stopped": "KILLED", "interrupted": "KILLED"}


@contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Held while a fold job may create the embedded store or the experiment: the workflow's
    parallel fold jobs otherwise race through MLflow's table migrations (seen: 3 of 4 failed)."""
    if not uri.startswith(SQLITE):
        yield
        return
    lock = Path(uri[len(SQLITE) :] + ".lock")
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


class MlflowTracker:
    def __init__(self, uri: str, experiment: str | None, tags: Mapping[str, str]) -> None:
        for name, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(name, value)
        from mlflow.tracking import MlflowClient

        self.uri = uri
        with store_lock(uri):  # the client creates or migrates the store's tables
            self.client = MlflowClient(tracking_uri=uri)
        self.experiment = experiment
        self.tags = dict(tags)
        self.run_id: str | None = None
        self.last_step = 0

    def start_fold(self, name: str, settings: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        experiment = self.experiment or str(settings.get("dataset") or "nnunet-core")
        with store_lock(self.uri):  # parallel fold jobs: one creates the store, the experiment
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id if found else self.client.create_experiment(experiment)
            )
        run = self.client.create_run(experiment_id, run_name=name, tags=self.tags)
        self.run_id = run.info.run_id
        params = [Param(k, v) for k, v in flat_settings(settings).items()]
        for start in range(0, len(params), BATCH):
            self.client.log_batch(self.run_id, params=params[start : start + BATCH])

    def log_epoch(self, epoch: int, metrics: Mapping[str, float]) -> None:
        self._log(metrics, epoch)
        self.last_step = epoch

    def end_fold(self, metrics: Mapping[str, float], model_folder: Path, status: str) -> None:
        if self.run_id is None:
            return
        self._log(metrics, self.last_step)
        self.client.set_tag(self.run_id, "model_folder", model_folder.absolute().as_uri())
        self.client.set_terminated(self.run_id, STATUS.get(status, "FAILED"))

    def _log(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        if self.run_id is None or not metrics:
            return
        now = int(time.time() * 1000)
        batch = [Metric(key, value, now, step) for key, value in metrics.items()]
        self.client.log_batch(self.run_id, metrics=batch)
