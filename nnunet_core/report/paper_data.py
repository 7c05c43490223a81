"""Per-case values of every candidate of one run (a dataset trained with one seed), for the paper.

A run is one ``results/DatasetXXX_Name`` folder: its ``inference_information.json`` names the
candidates (configurations and pair ensembles) and the selected one; each candidate's
cross-validation ``summary.json`` gives per-case metrics over the same training cases, which the
paired tests need. A test-set ``summary.json`` adds the selected model's test cases.

Each row is one case's value of one metric for one foreground label (NaN where the label is
absent from reference and prediction, upstream's Dice of an empty class), so that the table can
average as upstream's ``foreground_mean`` does: per class over cases (NaN left out), then over
classes. HD95 and NSD are there when the summaries were written with ``--surface-metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.layout.results import DEFAULT_FOLDS, inference_information_file
from nnunet_core.report.collect import candidate_entries, candidate_summary_file
from nnunet_core.report.summaries import (
    ReportInputError,
    case_name,
    read_json_file,
    short_names,
)

PAPER_METRICS = ("Dice", "HD95", "NSD")
TEST_SET = "test set"


@dataclass(frozen=True)
class Run:
    """One dataset trained with one seed: its results folder and, if any, its test summary."""

    dataset: str
    seed: int
    results_dir: Path
    test_summary: Path | None = None


def case_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """case, metric, label, value: each case's value of each metric per foreground label (NaN
    kept); a metric no case has for any label is left out."""
    entries = summary.get("metric_per_case", [])
    rows = []
    for metric in PAPER_METRICS:
        part = [
            {"case": case_name(entry), "metric": metric, "label": key, "value": _number(m, metric)}
            for entry in entries
            for key, m in entry["metrics"].items()
            if key != "0"
        ]
        if any(np.isfinite(r["value"]) for r in part):
            rows += part
    return pd.DataFrame(rows, columns=["case", "metric", "label", "value"])


def _number(metrics: dict[str, Any], metric: str) -> float:
    value = metrics.get(metric)
    return np.nan if value is None else float(value)


def run_frame(run: Run) -> tuple[pd.DataFrame, str]:
    """dataset, seed, candidate, label, selected, case, metric, value for every candidate (and
    ``test set`` for the selected model's test cases); and the selected candidate's label."""
    info_file = inference_information_file(run.results_dir)
    if not info_file.is_file():
        msg = f"{info_file}: not found (written by `nnunet-core find-best-config`)"
        raise ReportInputError(msg)
    info = read_inference_information(info_file, ReportInputError)
    entries = candidate_entries(info)
    folds = [int(f) for f in info.get("folds", DEFAULT_FOLDS)]
    labels = short_names([e["identifier"] for e in entries])
    winner = info.get("winner") or info.get("best_model_or_ensemble", {}).get("identifier", "")
    frames = []
    for entry in entries:
        path = candidate_summary_file(run.results_dir, entry, folds)
        if not path.is_file():
            msg = f"{path}: cross-validation summary of {entry['identifier']} not found"
            raise ReportInputError(msg)
        frame = case_frame(read_json_file(path))
        frame["candidate"] = labels[entry["identifier"]]
        frames.append(frame)
    if run.test_summary is not None and Path(run.test_summary).is_file():
        frame = case_frame(read_json_file(Path(run.test_summary)))
        frame["candidate"] = TEST_SET
        frames.append(frame)
    combined = pd.concat(frames, ignore_index=True)
    combined["dataset"], combined["seed"] = run.dataset, run.seed
    return combined, labels.get(winner, winner)
