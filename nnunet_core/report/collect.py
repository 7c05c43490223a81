"""Gather a dataset's results into pandas tables, so figures and tables never touch the files.

Required: ``results/D/inference_information.json`` (``nnunet-core find-best-config``); it names
every candidate, the winner and the postprocessing. Everything else is optional and skipped with
a note: training curves (checkpoints or training logs), the folds' ``validation/summary.json``,
``provenance.json``, the candidates' cross-validation summaries (per-fold points; their per-class
means fall back to the ones in ``inference_information.json``), a test-set ``summary.json`` and
Snakemake logs. Dice keys are upstream's (``"1"``, regions ``"(1, 2)"``); names come from the
model folders' ``dataset.json``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    DEFAULT_FOLDS,
    INFERENCE_INFORMATION_JSON,
    SUMMARY_JSON,
    crossval_dir,
    ensembles_dir,
    fold_dirs_in,
    fold_of_folder,
    inference_information_file,
    is_ensemble_name,
    is_model_folder_name,
    validation_dir,
)
from nnunet_core.report.history import CURVE_COLUMNS, read_fold_history
from nnunet_core.report.outcome import Selection, collect_selection, collect_test
from nnunet_core.report.runtimes import (
    PROVENANCE,
    provenance_rows,
    run_times_frame,
    snakemake_record_rows,
    snakemake_rows,
)
from nnunet_core.report.summaries import (
    FOREGROUND,
    ReportInputError,
    configuration_of,
    dice_of,
    ensemble_members,
    per_class_rows,
    read_json_file,
    short_names,
)

__all__ = ["FOREGROUND", "ReportData", "ReportInputError", "Selection", "collect"]


@dataclass
class ReportData:
    """Everything the report shows, one DataFrame per view."""

    dataset: str
    results_dir: Path
    class_names: dict[str, str]  # label key -> name
    candidates: pd.DataFrame  # identifier, label, kind, members, cv_foreground_dice, selected
    cv_dice: pd.DataFrame  # identifier, label_key, name, dice
    cv_fold_dice: pd.DataFrame  # identifier, fold, foreground_dice
    selection: Selection | None
    curves: pd.DataFrame  # model, configuration, fold, source, *CURVE_COLUMNS
    fold_dice: pd.DataFrame  # model, configuration, fold, label_key, name, dice
    run_times: pd.DataFrame
    test_dice: pd.DataFrame | None  # label_key, name, dice (mean over cases)
    test_case_dice: pd.DataFrame | None  # case, label_key, name, dice
    notes: list[str] = field(default_factory=list)
    # the selected candidate's cross-validation summary.json (None where the run has none)
    selected_cv_summary: Path | None = None


def model_dirs(results_dir: Path) -> list[Path]:
    """Trained model folders ``Trainer__Plans__Config`` (those with a fold folder)."""
    return sorted(
        p
        for p in results_dir.iterdir()
        if p.is_dir() and is_model_folder_name(p.name) and fold_dirs_in(p)
    )


def class_names(results_dir: Path, preferred: list[str]) -> dict[str, str]:
    """Label key -> name from the first model folder's ``dataset.json`` (winner's first)."""
    folders = [results_dir / m for m in preferred] + model_dirs(results_dir)
    for folder in folders:
        path = folder / DATASET_JSON
        if not path.is_file():
            continue
        labels = read_json_file(path).get("labels", {})
        names = {}
        for name, value in labels.items():
            if name in ("background", "ignore"):
                continue
            key = str(tuple(int(v) for v in value)) if isinstance(value, list) else str(int(value))
            names[key] = name
        return names
    return {}


def candidate_entries(info: dict[str, Any]) -> list[dict[str, Any]]:
    """Our ``candidates`` list, or one built from upstream's ``all_results``."""
    if info.get("candidates"):
        return list(info["candidates"])
    return [
        {
            "identifier": identifier,
            "kind": "ensemble" if is_ensemble_name(identifier) else "single",
            "members": ensemble_members(identifier) or [identifier],
            "foreground_mean_dice": score,
            "mean_dice": {},
        }
        for identifier, score in info.get("all_results", {}).items()
    ]


def candidate_summary_file(results_dir: Path, entry: dict[str, Any], folds: list[int]) -> Path:
    """Where the candidate's cross-validation summary is (the tree may have moved since)."""
    identifier = entry["identifier"]
    if entry.get("kind") == "ensemble" or is_ensemble_name(identifier):
        local = ensembles_dir(results_dir) / identifier / SUMMARY_JSON
    else:
        local = crossval_dir(results_dir / identifier, folds) / SUMMARY_JSON
    if local.is_file() or not entry.get("source"):
        return local
    recorded = Path(entry["source"]) / SUMMARY_JSON
    return recorded if recorded.is_file() else local


def file_to_fold(model_dir: Path) -> dict[str, str]:
    """Validation file name -> fold, from the fold folders (maps crossval cases to folds)."""
    mapping = {}
    for folder in fold_dirs_in(model_dir):
        validation = validation_dir(folder)
        if validation.is_dir():
            for path in validation.iterdir():
                mapping.setdefault(path.name, fold_of_folder(folder))
    return mapping


def fold_foreground_dice(summary: dict[str, Any], folds_of: dict[str, str]) -> list[dict]:
    """Per fold: the summary's aggregation (nanmean over cases, mean over classes) on its cases."""
    by_fold: dict[str, list[dict[str, Any]]] = {}
    for case in summary.get("metric_per_case", []):
        fold = folds_of.get(Path(case.get("prediction_file", "")).name)
        if fold is not None:
            by_fold.setdefault(fold, []).append(case["metrics"])
    rows = []
    for fold, cases in by_fold.items():
        keys = [k for k in cases[0] if k not in ("0", 0)]
        with warnings.catch_warnings():  # a class absent from all of a fold's cases is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            means = [np.nanmean([dice_of(c.get(k)) for c in cases]) for k in keys]
        rows.append({"fold": fold, "foreground_dice": float(np.mean(means)) if means else math.nan})
    return rows


def collect_candidates(
    results_dir: Path, info: dict[str, Any], names: dict[str, str], notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, Path | None]:
    """``(candidates, cv_dice per class, per-fold foreground Dice)`` of every candidate, and
    the selected one's cross-validation summary where it exists."""
    folds = [int(f) for f in info.get("folds", DEFAULT_FOLDS)]
    winner = info.get("winner") or info.get("best_model_or_ensemble", {}).get("identifier")
    entries = candidate_entries(info)
    labels = short_names([e["identifier"] for e in entries])
    fold_maps: dict[str, dict[str, str]] = {}
    rows, class_rows, fold_rows = [], [], []
    selected_summary = None
    for entry in entries:
        identifier = entry["identifier"]
        members = entry.get("members") or ensemble_members(identifier) or [identifier]
        summary_file = candidate_summary_file(results_dir, entry, folds)
        mean, score = entry.get("mean_dice", {}), dice_of(entry.get("foreground_mean_dice"))
        if summary_file.is_file():
            if identifier == winner:
                selected_summary = summary_file
            summary = read_json_file(summary_file)
            mean, score = summary.get("mean", mean), dice_of(summary.get("foreground_mean"))
            first = results_dir / members[0]
            if members[0] not in fold_maps:
                fold_maps[members[0]] = file_to_fold(first) if first.is_dir() else {}
            for row in fold_foreground_dice(summary, fold_maps[members[0]]):
                fold_rows.append({"identifier": identifier, **row})
        else:
            notes.append(
                f"{summary_file} missing: {identifier} shows the Dice recorded in "
                f"{INFERENCE_INFORMATION_JSON}, without per-fold points"
            )
        rows.append(
            {
                "identifier": identifier,
                "label": labels[identifier],
                "kind": entry.get("kind", "ensemble" if len(members) > 1 else "single"),
                "members": " ".join(members),
                "cv_foreground_dice": score,
                "selected": identifier == winner,
            }
        )
        class_rows += per_class_rows(mean, names, identifier=identifier)
    candidate_columns = ["identifier", "label", "kind", "members", "cv_foreground_dice", "selected"]
    candidates = pd.DataFrame(rows, columns=candidate_columns)
    cv_dice = pd.DataFrame(class_rows, columns=["identifier", "label_key", "name", "dice"])
    cv_folds = pd.DataFrame(fold_rows, columns=["identifier", "fold", "foreground_dice"])
    return candidates, cv_dice, cv_folds, selected_summary


def collect_folds(
    results_dir: Path, names: dict[str, str], notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """Training curves, per-fold validation Dice and training run times of every model folder."""
    curves, dice_rows, time_rows = [], [], []
    for model_dir in model_dirs(results_dir):
        model, configuration = model_dir.name, configuration_of(model_dir.name)
        for folder in fold_dirs_in(model_dir):
            fold = fold_of_folder(folder)
            where = {"model": model, "configuration": configuration, "fold": fold}
            history = read_fold_history(folder)
            if history is None:
                notes.append(f"{folder}: no checkpoint or training log, no training curve")
            else:
                frame, source = history
                curves.append(frame.assign(**where, source=source))
            summary_file = validation_dir(folder) / SUMMARY_JSON
            if summary_file.is_file():
                mean = read_json_file(summary_file).get("mean", {})
                dice_rows += per_class_rows(mean, names, **where)
            if (folder / PROVENANCE).is_file():
                time_rows += provenance_rows(folder / PROVENANCE, model, configuration, fold)
    columns = ["model", "configuration", "fold", "source", *CURVE_COLUMNS]
    curve_frame = (
        pd.concat(curves, ignore_index=True)[columns] if curves else pd.DataFrame(columns=columns)
    )
    fold_dice = pd.DataFrame(
        dice_rows, columns=["model", "configuration", "fold", "label_key", "name", "dice"]
    )
    return curve_frame, fold_dice, time_rows


def collect(
    results_dir: str | Path,
    test_summary: str | Path | None = None,
    snakemake_logs: str | Path | None = None,
    test_set_note: str | None = None,
    job_records: tuple[Path, list[Path]] | None = None,
) -> ReportData:
    """Read a dataset's results folder (``results/DatasetXXX_Name``) into a ``ReportData``;
    ``test_set_note``: why there is no test summary, as the workflow knows it (else a guess);
    ``job_records``: Snakemake's ``.snakemake/metadata`` and the run's log folders."""
    results_dir = Path(results_dir)
    dataset = results_dir.name
    info_file = inference_information_file(results_dir)
    if not info_file.is_file():
        msg = f"{info_file} not found; it is written by `nnunet-core find-best-config -d {dataset}`"
        raise ReportInputError(msg)
    info = read_inference_information(info_file, ReportInputError)
    notes: list[str] = []
    winner = info.get("winner") or info.get("best_model_or_ensemble", {}).get("identifier", "")
    names = class_names(results_dir, ensemble_members(winner) or [winner])
    candidates, cv_dice, cv_folds, selected_summary = collect_candidates(
        results_dir, info, names, notes
    )
    selection = collect_selection(info, names, notes)
    curves, fold_dice, time_rows = collect_folds(results_dir, names, notes)
    if snakemake_logs is not None:
        if Path(snakemake_logs).is_dir():
            time_rows += snakemake_rows(Path(snakemake_logs))
        else:
            notes.append(f"{snakemake_logs}: no such folder, Snakemake job times skipped")
    if job_records is not None:
        if Path(job_records[0]).is_dir():
            time_rows += snakemake_record_rows(Path(job_records[0]), job_records[1])
        else:
            notes.append(f"{job_records[0]}: no such folder, Snakemake job records skipped")
    if curves.empty:
        notes.append(f"no model folder in {results_dir} records its training: no curves")
    if not time_rows:
        notes.append("no provenance.json or Snakemake log with finished jobs: run times skipped")
    test_dice = test_cases = None
    if test_summary is not None:
        test_summary = Path(test_summary)
        if not test_summary.is_file():
            msg = (
                f"{test_summary} not found; it is written by "
                "`nnunet-core evaluate LABELS_TS PREDICTIONS` (leave --test-summary out without "
                "test labels)"
            )
            raise ReportInputError(msg)
        test_dice, test_cases = collect_test(test_summary, names)
    else:
        notes.append(
            test_set_note or "no test-set summary given (no test labels?): test Dice skipped"
        )
    if candidates["kind"].eq("ensemble").sum() == 0:
        notes.append(
            "no ensembles among the candidates (one configuration, or ensembling disabled)"
        )
    return ReportData(
        dataset=dataset,
        results_dir=results_dir,
        class_names=names,
        candidates=candidates,
        cv_dice=cv_dice,
        cv_fold_dice=cv_folds,
        selection=selection,
        curves=curves,
        fold_dice=fold_dice,
        run_times=run_times_frame(time_rows),
        test_dice=test_dice,
        test_case_dice=test_cases,
        notes=notes,
        selected_cv_summary=selected_summary,
    )
