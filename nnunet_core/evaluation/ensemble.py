"""Ensembles of configurations: average the softmax/sigmoid probabilities per case, then argmax.

As upstream (``ensembling/ensemble.py``): the members' ``{case}.npz`` ('probabilities') are summed
in float32 in member order and divided by their number; the segmentation comes from the mean
(argmax, or the regions painted in ``regions_class_order``) and is written with the geometry of
the first member's ``{case}.json`` (upstream: ``.pkl``; without one, the member's segmentation
header). For cross-validation (``ensemble_crossval``) every member's folds are merged per case
into ``results/D/ensembles/ensemble___A___B___0_1_2_3_4/`` and evaluated. A case whose ``.npz`` is
missing stops the run with the configuration, fold, case and the command that writes it.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.crossval import (
    case_files,
    crossval_cases,
    is_stale,
    load_model_dataset_json,
    validation_files,
)
from nnunet_core.evaluation.metrics import classes_from_dataset_json, compute_metrics_on_folder
from nnunet_core.evaluation.surface import SurfaceSettings
from nnunet_core.io.atomic import atomic_path, write_json
from nnunet_core.io.dataset_json import LabelSpec, load_dataset_json
from nnunet_core.io.images import read_seg, write_seg
from nnunet_core.io.json_input import read_json_object
from nnunet_core.io.npz_input import load_probabilities, probabilities_header
from nnunet_core.io.removal import remove_tree
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    DEFAULT_FOLDS,
    PLANS_JSON,
    SUMMARY_JSON,
    DatasetDirs,
    TrainedModel,
    ensemble_name,
)
from nnunet_core.runtime.parallel import map_cases


def average_probabilities(npz_files: Sequence[Path]) -> np.ndarray:
    """Mean of the members' 'probabilities' (float32, summed in member order like upstream)."""
    total: np.ndarray | None = None
    for path in npz_files:
        probabilities = load_probabilities(path)  # never unpickled; one line if unreadable
        if total is None:
            total = probabilities.astype(np.float32, copy=True)
            first = path
        elif probabilities.shape != total.shape:
            msg = (
                f"{path}: probabilities of shape {probabilities.shape} differ from {first} "
                f"{total.shape}"
            )
            raise DatasetError(msg)
        else:
            total += probabilities
    if total is None:
        msg = "average_probabilities needs at least one .npz file"
        raise ValueError(msg)
    total /= len(npz_files)
    return total


def check_member_files(members_per_case: dict[str, list[Path]], label_spec: LabelSpec) -> None:
    """Every member's ``.npz`` an archive of float probabilities, one shape per case and a
    channel per output, read from the headers only: before the output folder is made."""
    heads = label_spec.num_segmentation_heads
    for _case, files in sorted(members_per_case.items()):
        first = probabilities_header(files[0])
        for path in files:
            shape = probabilities_header(path)
            if len(shape) not in (3, 4) or shape[0] != heads:
                msg = (
                    f"{path}: probabilities of shape {shape}; this dataset needs {heads} channels "
                    "and 2 or 3 image axes"
                )
                raise DatasetError(msg)
            if shape != first:
                msg = f"{path}: probabilities of shape {shape} differ from {files[0]} {first}"
                raise DatasetError(msg)


def case_properties(npz_file: Path, file_ending: str) -> dict[str, Any]:
    """Geometry for writing: ``{case}.json`` next to the npz, else the segmentation's header."""
    base = npz_file.with_suffix("")
    json_file = base.with_name(base.name + ".json")
    if json_file.is_file():
        return read_json_object(json_file, "case geometry file")
    seg_file = base.with_name(base.name + file_ending)
    if seg_file.is_file():
        return read_seg(seg_file)[1]
    msg = (
        f"{npz_file}: neither {json_file.name} nor {seg_file.name} next to it to take the image "
        "geometry from"
    )
    raise DatasetError(msg)


def merge_case(
    npz_files: Sequence[Path],
    output_base: Path,
    file_ending: str,
    label_spec: LabelSpec,
    save_npz: bool = False,
) -> Path:
    """Average one case's members, write ``{output_base}{file_ending}`` (+ ``.npz``/``.json``)."""
    # export imports torch; importing it here keeps `nnunet-core --help` fast
    from nnunet_core.inference.export import probabilities_to_segmentation

    properties = case_properties(npz_files[0], file_ending)
    probabilities = average_probabilities(npz_files)
    segmentation = probabilities_to_segmentation(probabilities, label_spec)
    seg_path = output_base.with_name(output_base.name + file_ending)
    write_seg(segmentation, seg_path, properties)  # atomic, sidecar files included
    if save_npz:
        npz_path = output_base.with_name(output_base.name + ".npz")
        with atomic_path(npz_path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            np.savez_compressed(handle, probabilities=probabilities)
        write_json(output_base.with_name(output_base.name + ".json"), properties)
    return seg_path


def _merge_all(
    members_per_case: dict[str, list[Path]],
    output_dir: Path,
    file_ending: str,
    label_spec: LabelSpec,
    num_processes: int,
    save_npz: bool,
) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    tasks = [
        (case, (files, output_dir / case, file_ending, label_spec, save_npz))
        for case, files in sorted(members_per_case.items())
    ]
    map_cases(merge_case, tasks, num_processes, "ensemble")


def ensemble_folders(
    input_dirs: Sequence[str | Path],
    output_dir: str | Path,
    num_processes: int = 1,
    save_npz: bool = False,
    dataset_json_file: str | Path | None = None,
) -> list[str]:
    """Ensemble prediction folders (``predict --save_probabilities``); returns the cases.

    Every folder must hold the same ``{case}.npz`` files. ``dataset.json`` defaults to the first
    folder's (``predict`` writes it there) and is copied into ``output_dir``.
    """
    dirs = [Path(d) for d in input_dirs]
    output_dir = Path(output_dir)
    djfile = Path(dataset_json_file) if dataset_json_file else dirs[0] / DATASET_JSON
    dataset_json = load_dataset_json(djfile)
    per_folder: list[dict[str, Path]] = []
    for folder in dirs:
        if not folder.is_dir():
            msg = f"{folder}: input folder not found"
            raise DatasetError(msg)
        per_folder.append(case_files(folder, ".npz"))
    every_case = set().union(*per_folder)
    if not every_case:
        msg = (
            f"{dirs[0]}: no .npz probabilities to ensemble; predict with `nnunet-core predict ... "
            "--save_probabilities`"
        )
        raise DatasetError(msg)
    for folder, cases in zip(dirs, per_folder, strict=True):
        missing = sorted(every_case - set(cases))
        if missing:
            msg = (
                f"{folder}: no {missing[0]}.npz ({len(missing)} case(s) missing that other folders "
                "have); predict it with `nnunet-core predict ... --save_probabilities`"
            )
            raise DatasetError(msg)
    members = {case: [cases[case] for cases in per_folder] for case in every_case}
    check_member_files(members, dataset_json.label_spec)
    _merge_all(
        members,
        output_dir,
        dataset_json.file_ending,
        dataset_json.label_spec,
        num_processes,
        save_npz,
    )
    shutil.copy(djfile, output_dir / DATASET_JSON)
    if (dirs[0] / PLANS_JSON).is_file():
        shutil.copy(dirs[0] / PLANS_JSON, output_dir / PLANS_JSON)
    return sorted(members)


def crossval_npz_files(
    dirs: DatasetDirs, model: TrainedModel, folds: Sequence[int], file_ending: str
) -> dict[str, Path]:
    """``{case: npz}`` of a model's validation; a prediction without its npz is an error."""
    npz_files: dict[str, Path] = {}
    for case, (fold, seg_file) in crossval_cases(dirs, model, folds, file_ending).items():
        npz = seg_file.with_name(f"{case}.npz")
        if not npz.is_file():
            command = model.train_command(dirs.name, fold, "--val", "--npz")
            msg = (
                f"{model.configuration} fold {fold}: case {case} has no probabilities {npz}; "
                f"ensembling needs them: run `{command}` (or train with --npz)"
            )
            raise DatasetError(msg)
        npz_files[case] = npz
    return npz_files


def ensemble_crossval(
    dirs: DatasetDirs,
    models: Sequence[TrainedModel],
    folds: Sequence[int] = DEFAULT_FOLDS,
    num_processes: int = 1,
    surface: SurfaceSettings | None = None,
) -> dict[str, Any]:
    """Ensemble the models' cross-validation per case and evaluate -> ``summary.json``."""
    if len(models) < 2:
        msg = (
            "an ensemble needs at least two configurations, got "
            f"{[m.configuration for m in models]}"
        )
        raise DatasetError(msg)
    dataset_json = load_model_dataset_json(dirs, models[0])
    file_ending = dataset_json.file_ending
    per_model = [crossval_npz_files(dirs, m, folds, file_ending) for m in models]
    every_case = set().union(*per_model)
    for model, cases in zip(models, per_model, strict=True):
        missing = sorted(every_case - set(cases))
        if missing:
            msg = (
                f"{model.configuration}: no validation prediction for case {missing[0]} in folds "
                f"{list(folds)}, which other ensemble members have"
            )
            raise DatasetError(msg)
    members = {case: [cases[case] for cases in per_model] for case in every_case}
    check_member_files(members, dataset_json.label_spec)
    output = dirs.ensembles_dir / ensemble_name(models, folds)
    remove_tree(output, inside=[dirs.results])
    _merge_all(members, output, file_ending, dataset_json.label_spec, num_processes, False)
    shutil.copy(dirs.dataset_json_file(models[0]), output / DATASET_JSON)
    if dirs.plans_json_file(models[0]).is_file():
        shutil.copy(dirs.plans_json_file(models[0]), output / PLANS_JSON)
    return compute_metrics_on_folder(
        dirs.gt_dir,
        output,
        file_ending,
        dataset_json.label_spec,
        num_processes=num_processes,
        output_file=output / SUMMARY_JSON,
        chill=True,
        classes=classes_from_dataset_json(dataset_json),
        surface=surface,
    )


def ensemble_summary_file(
    dirs: DatasetDirs,
    models: Sequence[TrainedModel],
    folds: Sequence[int] = DEFAULT_FOLDS,
    num_processes: int = 1,
    overwrite: bool = False,
) -> Path:
    """``summary.json`` of the ensemble's cross-validation, rebuilt only if missing or stale."""
    summary = dirs.ensembles_dir / ensemble_name(models, folds) / SUMMARY_JSON
    sources = [f for m in models for f in validation_files(dirs, m, folds)]
    if overwrite or is_stale(summary, sources):
        ensemble_crossval(dirs, models, folds, num_processes)
    return summary
