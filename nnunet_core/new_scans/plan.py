"""The prediction mode's jobs, decided while Snakemake reads the workflow (config ``predict:``).

The model and the settings make one key: a run folder ``work_dir/new_scans/runs/<key>`` holds
their spec. A case is done when its segmentation is in the output folder and its record there
carries this key: a rerun predicts only the cases that are not (a deleted output, a case a killed
job did not reach, a case that failed), and a changed model or setting changes the key, so every
case is predicted again (as a changed setting restarts a fold). The cases to predict are cut into
shards of ``cases_per_job``; each shard is a job named by a digest of its cases, so a rerun with
nothing missing has no job at all ("Nothing to be done").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.dataset.discovery import case_identifiers
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.prediction_output import check_output_folder
from nnunet_core.layout.new_scans import (
    SHARD_NO_RETRY,
    SHARDS_FOLDER,
    SPEC_JSON,
    SUMMARIES_FOLDER,
    case_record_path,
    run_dir,
)
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.new_scans.model_consent import code_consent
from nnunet_core.new_scans.model_source import ScanModel, resolve_model

# what changes the predicted voxels (the device does not: it is left out of the key; low_memory's
# one tile per forward pass rounds a few voxels' sums differently from a batch of tiles)
KEY_SETTINGS = ("use_mirroring", "step_size", "save_probabilities", "low_memory")
DEFAULTS: dict[str, Any] = {
    "cases_per_job": 20,
    "use_mirroring": True,
    "step_size": 0.5,
    "save_probabilities": False,
    "low_memory": False,
    "device": "auto",
    "trust_model_code": False,
    "folds": None,
}


@dataclass(frozen=True)
class ScanRun:
    """One prediction run: where its spec lives and the shards still to predict."""

    key: str
    folder: Path
    spec: dict[str, Any]
    shards: dict[str, list[str]]  # shard name -> its cases
    summary: str  # the summary job's name: its shards

    @property
    def spec_file(self) -> Path:
        return self.folder / SPEC_JSON


def settings_of(predict: Mapping[str, Any]) -> dict[str, Any]:
    return {name: predict.get(name, default) for name, default in DEFAULTS.items()}


def plan_run(predict: Mapping[str, Any], work_dir: Path, *, write: bool = True) -> ScanRun:
    """Resolve the model, decide what is missing, write the spec and the shards' case lists.

    ``write``: False in a job's own Snakemake (a cluster job reads the workflow again while some
    cases are done): the main process wrote the files its job reads, and nothing else is
    needed."""
    settings = settings_of(predict)
    if not 0 < float(settings["step_size"]) <= 1:
        msg = f"predict.step_size must be in (0, 1], got {settings['step_size']}"
        raise ConfigurationError(msg)
    source, output = Path(str(predict["input"])), Path(str(predict["output"]))
    if not source.is_dir():
        msg = f"predict.input: {source} is not a folder"
        raise ConfigurationError(msg)
    if source.resolve() == output.resolve():
        msg = f"predict.output: {output} must differ from predict.input"
        raise ConfigurationError(msg)
    check_output_folder(output, flag="predict.output")  # never into a raw dataset
    model = resolve_model(str(predict["model"]), work_dir, settings["folds"])
    consent = code_consent(model, work_dir, bool(settings["trust_model_code"]))
    dataset_json = load_dataset_json(model.members[0].model_dir / DATASET_JSON)
    key = _key(model, settings)
    spec = {
        "key": key,
        "model": model.description,
        "members": [{"model_dir": str(m.model_dir), "folds": list(m.folds)} for m in model.members],
        "postprocessing": None if model.postprocessing is None else str(model.postprocessing),
        "consent": consent,
        "input": str(source.resolve()),
        "output": str(output.resolve()),
        "file_ending": dataset_json.file_ending,
        # what the jobs read; not the shard size (a rerun in other shards reruns no job)
        "settings": {k: v for k, v in settings.items() if k != "cases_per_job"},
    }
    # one folder per model, settings, input and output (two runs of one model apart)
    place = json.dumps([key, spec["input"], spec["output"]])
    folder = run_dir(work_dir, hashlib.sha256(place.encode()).hexdigest())
    if write:
        _write_if_changed(folder / SPEC_JSON, spec)
        # a new run tries again what an earlier one marked as not worth a retry
        for marker in (folder / SHARDS_FOLDER).glob(f"*{SHARD_NO_RETRY}"):
            marker.unlink(missing_ok=True)
    cases = case_identifiers(source, dataset_json.file_ending)
    if not cases:
        msg = f"predict.input: {source} holds no images named CASE_0000{dataset_json.file_ending}"
        raise ConfigurationError(msg)
    missing = [c for c in cases if not is_done(output, c, key, dataset_json.file_ending)]
    size = int(settings["cases_per_job"])
    shards = {}
    for start in range(0, len(missing), size):
        chunk = missing[start : start + size]
        name = hashlib.sha256("\n".join(chunk).encode()).hexdigest()[:12]
        shards[name] = chunk
        if write:
            _write_if_changed(shard_cases_file(folder, name), chunk)
    return ScanRun(key, folder, spec, shards, _summary_name(folder, list(shards), write))


def _summary_name(folder: Path, shards: list[str], write: bool) -> str:
    """The summary job of these shards, named by them (a list kept for the job's own Snakemake).

    Snakemake reruns a job whose set of inputs changed since it ran, so one summary job whose
    inputs are the shards of the day would run again on a rerun with nothing missing. With
    nothing missing the newest summary is asked for again, with the shards it was made from.
    """
    if not shards:
        done = sorted(
            (folder / SUMMARIES_FOLDER).glob("*.done"), key=lambda p: p.stat().st_mtime_ns
        )
        if done:
            return done[-1].name.removesuffix(".done")
    name = hashlib.sha256("\n".join(shards).encode()).hexdigest()[:12]
    if write:
        _write_if_changed(folder / SUMMARIES_FOLDER / f"{name}.shards.json", shards)
    return name


def summary_marker(folder: Path, name: str) -> Path:
    return folder / SUMMARIES_FOLDER / f"{name}.done"


def summary_shards(folder: Path, name: str) -> list[str]:
    """The shards a summary job waits for (as the planning process wrote them)."""
    return [str(s) for s in read_json(folder / SUMMARIES_FOLDER / f"{name}.shards.json")]


def _key(model: ScanModel, settings: Mapping[str, Any]) -> str:
    chosen = {name: settings[name] for name in KEY_SETTINGS}
    text = json.dumps([list(map(str, model.identity)), chosen], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _write_if_changed(path: Path, content: Any) -> None:
    """Written only when its content differs: an unchanged spec keeps its time, so Snakemake
    reruns nothing because the workflow was read again."""
    if path.is_file():
        try:
            if read_json(path) == json.loads(json.dumps(content)):
                return
        except ValueError:
            pass
    write_json(path, content)


def is_done(output: Path, case: str, key: str, file_ending: str) -> bool:
    """The case's segmentation exists and its record says it was made with ``key``."""
    if not (output / f"{case}{file_ending}").is_file():
        return False
    try:
        return read_json(case_record_path(output, case)).get("key") == key
    except (OSError, ValueError, AttributeError):
        return False


def shard_cases_file(folder: Path, shard: str) -> Path:
    return folder / SHARDS_FOLDER / f"{shard}.cases.json"


def shard_marker(folder: Path, shard: str) -> Path:
    return folder / SHARDS_FOLDER / f"{shard}.done.json"


def no_retry_marker(folder: Path, shard: str) -> Path:
    """Left by a shard attempt whose failure no retry fixes (the model, its code)."""
    return folder / SHARDS_FOLDER / f"{shard}{SHARD_NO_RETRY}"


def shard_cases(folder: Path, shard: str) -> list[str]:
    """A shard's cases as the planning process wrote them (a job's own Snakemake, which reads
    the workflow again after some cases are done, finds the same list)."""
    return [str(c) for c in read_json(shard_cases_file(folder, shard))]
