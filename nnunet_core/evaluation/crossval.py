"""Cross-validation results of one configuration: every fold's validation predictions, evaluated.

Upstream's ``accumulate_cv_results``: the folds' ``validation/{case}{file_ending}`` go into one
folder ``crossval_results_folds_0_1_2_3_4/`` (hard links here, copies across file systems) with
``dataset.json``/``plans.json``, and that folder is evaluated again from scratch (never by
merging the folds' summaries). References are ``$nnUNet_preprocessed/D/gt_segmentations``
(upstream prefers ``labelsTr``, which holds the same files). Checks upstream lacks: a fold whose
validation did not finish (no ``summary.json``) or that misses a case of its split is an error
naming the fold, the case and the command that produces it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.metrics import classes_from_dataset_json, compute_metrics_on_folder
from nnunet_core.evaluation.surface import SurfaceSettings
from nnunet_core.io.atomic import read_json
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.removal import remove_file, remove_tree
from nnunet_core.layout.preprocessed import SPLITS_JSON
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    DEFAULT_FOLDS,
    PLANS_JSON,
    SUMMARY_JSON,
    DatasetDirs,
    TrainedModel,
    crossval_dir,
    fold_dir,
    validation_dir,
)


def case_files(folder: Path, file_ending: str) -> dict[str, Path]:
    """``{case: path}`` of the files in ``folder`` ending in ``file_ending``."""
    return {
        p.name[: -len(file_ending)]: p
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name.endswith(file_ending) and not p.name.startswith(".")
    }


def _split_val_cases(dirs: DatasetDirs, fold: int) -> list[str] | None:
    splits_path = dirs.preprocessed / SPLITS_JSON
    if not splits_path.is_file():
        return None
    splits = read_json(splits_path)
    if not isinstance(splits, list) or fold >= len(splits):
        return None
    return [str(c) for c in splits[fold]["val"]]


def fold_validation_cases(
    dirs: DatasetDirs, model: TrainedModel, fold: int, file_ending: str
) -> dict[str, Path]:
    """The finished validation predictions of one fold, checked against ``splits_final.json``."""
    validation = validation_dir(fold_dir(dirs.model_dir(model), fold))
    if not validation.is_dir():
        msg = (
            f"{model.configuration} fold {fold}: {validation} not found; train it with "
            f"`{model.train_command(dirs.name, fold)}`"
        )
        raise DatasetError(msg)
    if not (validation / SUMMARY_JSON).is_file():
        msg = (
            f"{model.configuration} fold {fold}: validation unfinished "
            f"({validation / SUMMARY_JSON} missing); run "
            f"`{model.train_command(dirs.name, fold, '--val')}`"
        )
        raise DatasetError(msg)
    cases = case_files(validation, file_ending)
    expected = _split_val_cases(dirs, fold)
    if expected is not None:
        missing = sorted(set(expected) - set(cases))
        extra = sorted(set(cases) - set(expected))
        if missing:
            msg = (
                f"{model.configuration} fold {fold}: no validation prediction for case "
                f"{missing[0]}{file_ending} in {validation} ({len(missing)} missing); run "
                f"`{model.train_command(dirs.name, fold, '--val')}`"
            )
            raise DatasetError(msg)
        if extra:
            msg = (
                f"{model.configuration} fold {fold}: case {extra[0]} in {validation} is not in "
                f"fold {fold}'s validation split ({dirs.preprocessed / SPLITS_JSON} changed?); run "
                f"`{model.train_command(dirs.name, fold, '--val')}`"
            )
            raise DatasetError(msg)
    return cases


def crossval_cases(
    dirs: DatasetDirs, model: TrainedModel, folds: Sequence[int], file_ending: str
) -> dict[str, tuple[int, Path]]:
    """``{case: (fold, prediction)}`` over the folds; a case predicted by two folds is an error."""
    merged: dict[str, tuple[int, Path]] = {}
    for fold in folds:
        for case, path in fold_validation_cases(dirs, model, fold, file_ending).items():
            if case in merged:
                msg = (
                    f"{model.configuration}: case {case} is predicted by fold {merged[case][0]} "
                    f"and fold {fold}; the folds' validation sets must not overlap"
                )
                raise DatasetError(msg)
            merged[case] = (fold, path)
    return merged


def link_or_copy(source: Path, target: Path) -> None:
    """Hard link (no extra disk), or copy where links are impossible (other file system)."""
    if target.exists() or target.is_symlink():
        remove_file(target, inside=[target.parent])  # the caller's output folder
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def newest_mtime(paths: Iterable[Path]) -> float:
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def is_stale(target: Path, sources: Iterable[Path]) -> bool:
    """True when ``target`` is missing or older than any source (make's rule)."""
    return not target.is_file() or newest_mtime(sources) > target.stat().st_mtime


def validation_files(dirs: DatasetDirs, model: TrainedModel, folds: Sequence[int]) -> list[Path]:
    """Every file in the folds' validation folders (what a crossval result depends on)."""
    files: list[Path] = []
    for fold in folds:
        validation = validation_dir(fold_dir(dirs.model_dir(model), fold))
        if validation.is_dir():
            files += [p for p in validation.iterdir() if p.is_file()]
    return files


def load_model_dataset_json(dirs: DatasetDirs, model: TrainedModel | None = None) -> DatasetJson:
    path = dirs.dataset_json_file(model)
    if not path.is_file():
        msg = f"{path}: dataset.json not found (written by `nnunet-core plan -d {dirs.name}`)"
        raise DatasetError(msg)
    return load_dataset_json(path)


def accumulate_crossval(
    dirs: DatasetDirs,
    model: TrainedModel,
    folds: Sequence[int] = DEFAULT_FOLDS,
    num_processes: int = 1,
    surface: SurfaceSettings | None = None,
) -> dict[str, Any]:
    """Rebuild ``crossval_results_folds_*`` of ``model`` and write its ``summary.json``.

    The folder is recreated from scratch (stale cases and old postprocessing go away);
    ``summary.json`` is written last, so its presence means the folder is complete.
    """
    dataset_json = load_model_dataset_json(dirs, model)
    cases = crossval_cases(dirs, model, folds, dataset_json.file_ending)
    if not cases:
        msg = (
            f"{model.configuration}: folds {list(folds)} have no validation predictions in "
            f"{dirs.model_dir(model)}"
        )
        raise DatasetError(msg)
    output = crossval_dir(dirs.model_dir(model), folds)
    remove_tree(output, inside=[dirs.model_dir(model)])
    output.mkdir(parents=True)
    shutil.copy(dirs.dataset_json_file(model), output / DATASET_JSON)
    if dirs.plans_json_file(model).is_file():
        shutil.copy(dirs.plans_json_file(model), output / PLANS_JSON)
    for case, (_, path) in cases.items():
        link_or_copy(path, output / f"{case}{dataset_json.file_ending}")
    return compute_metrics_on_folder(
        dirs.gt_dir,
        output,
        dataset_json.file_ending,
        dataset_json.label_spec,
        num_processes=num_processes,
        output_file=output / SUMMARY_JSON,
        chill=True,
        classes=classes_from_dataset_json(dataset_json),
        surface=surface,
    )


def crossval_summary_file(
    dirs: DatasetDirs,
    model: TrainedModel,
    folds: Sequence[int] = DEFAULT_FOLDS,
    num_processes: int = 1,
    overwrite: bool = False,
) -> Path:
    """``summary.json`` of the model's cross-validation, rebuilt only if missing or stale."""
    summary = crossval_dir(dirs.model_dir(model), folds) / SUMMARY_JSON
    if overwrite or is_stale(summary, validation_files(dirs, model, folds)):
        accumulate_crossval(dirs, model, folds, num_processes)
    return summary
