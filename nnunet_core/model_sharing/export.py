"""Which files of a results tree go into a model archive, in upstream's order, and writing it.

Upstream (nnU-Net 2.8.1, ``model_sharing/model_export.py``) walks, per configuration: each fold's
``debug.json`` (if any), the requested checkpoints, ``progress.png``, ``network_architecture.pdf``
(if any) and ``validation/summary.json`` (with ``--exp_cv_preds``: every file of ``validation/``
except ``.npz`` and ``.pkl``); then ``crossval_results_folds_<tag>/`` (``summary.json``,
``postprocessing.pkl``, ``postprocessing.json`` if present; every file with ``--exp_cv_preds``);
then the model folder's ``plans.json``, ``dataset_fingerprint.json`` and ``dataset.json``. After
all configurations: the ensembles whose members all use the exported trainer, plans and one of
the requested configurations (same files as crossval), ``inference_information.json`` and
``inference_information.txt``. Member names are relative to the results root.

Where upstream stops with a traceback on a missing ``progress.png``, ``validation/summary.json``
or ``dataset_fingerprint.json``, we leave the file out: an archive still needs only the plans,
dataset.json and checkpoints to predict. A missing checkpoint, fold folder, ``plans.json`` or
``dataset.json`` is an error. The zip is written next to ``-o`` and renamed onto it when complete.

A folder with a ``postprocessing.json`` but no ``postprocessing.pkl`` (ours never write one) gets
upstream's pickle in the archive, made from the JSON (``upstream_pickle``), where upstream's
exporter would have found it: upstream's users apply it with ``nnUNetv2_apply_postprocessing``.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    DEBUG_JSON,
    INFERENCE_INFORMATION_TXT,
    NETWORK_ARCHITECTURE_PDF,
    PLANS_JSON,
    POSTPROCESSING_JSON,
    POSTPROCESSING_PKL,
    PROGRESS_PNG,
    SUMMARY_JSON,
    TRAINER_JSON,
    TRAINER_SOURCE_FOLDER,
    TrainedModel,
    crossval_dir,
    ensemble_member_names,
    ensembles_dir,
    fold_dir,
    inference_information_file,
    is_ensemble_name,
    is_model_folder_name,
    trained_model_dir,
    validation_dir,
)
from nnunet_core.model_sharing.upstream_pickle import postprocessing_pickle

# the files of a crossval or ensemble folder an archive takes without --exp_cv_preds
SUMMARY_FILES = (SUMMARY_JSON, POSTPROCESSING_PKL, POSTPROCESSING_JSON)
# per-case files of a validation folder an archive never takes (probabilities, pickles)
SKIPPED_VALIDATION_SUFFIXES = (".npz", ".pkl")


@dataclass(frozen=True)
class ExportRequest:
    """What ``export-model-to-zip`` was asked for (upstream's flags)."""

    dataset: str  # full folder name, Dataset900_Synth
    configurations: Sequence[str]
    trainer: str
    plans: str
    folds: Sequence[int | str]
    checkpoints: Sequence[str]
    strict: bool = True
    crossval_predictions: bool = False


def _files(folder: Path) -> list[Path]:
    """The plain files of ``folder`` sorted by name (none when it does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file())


def _existing(*paths: Path) -> list[Path]:
    return [p for p in paths if p.is_file()]


def _required(path: Path, what: str) -> Path:
    if not path.is_file():
        msg = f"{path}: {what} not found; nothing was written"
        raise ConfigurationError(msg)
    return path


def _fold_files(model_dir: Path, fold: int | str, request: ExportRequest) -> list[Path]:
    folder = fold_dir(model_dir, fold)
    files = _existing(folder / DEBUG_JSON)
    files += [_required(folder / name, "checkpoint") for name in request.checkpoints]
    files += _existing(folder / PROGRESS_PNG, folder / NETWORK_ARCHITECTURE_PDF)
    validation = validation_dir(folder)
    if request.crossval_predictions:
        files += [p for p in _files(validation) if not p.name.endswith(SKIPPED_VALIDATION_SUFFIXES)]
    else:
        files += _existing(validation / SUMMARY_JSON)
    return files


def _summary_files(folder: Path, everything: bool) -> list[Path]:
    """A crossval or ensemble folder's summary and postprocessing (``everything``: all files);
    the pickle is listed where only the JSON exists (``write_archive`` makes it)."""
    pickle_file = folder / POSTPROCESSING_PKL
    if (folder / POSTPROCESSING_JSON).is_file() and not pickle_file.is_file():
        if everything:
            return sorted([*_files(folder), pickle_file])
        return [
            p for p in (folder / name for name in SUMMARY_FILES) if p.is_file() or p == pickle_file
        ]
    if everything:
        return _files(folder)
    return _existing(*(folder / name for name in SUMMARY_FILES))


def _model_files(model_dir: Path, request: ExportRequest) -> list[Path]:
    missing = [fold_dir(model_dir, f).name for f in request.folds]
    missing = [name for name in missing if not (model_dir / name).is_dir()]
    if missing:
        msg = f"{model_dir}: requested fold folder(s) missing: {', '.join(missing)}"
        raise ConfigurationError(msg)
    _required(model_dir / PLANS_JSON, PLANS_JSON)
    files: list[Path] = []
    for fold in request.folds:
        files += _fold_files(model_dir, fold, request)
    files += _summary_files(crossval_dir(model_dir, request.folds), request.crossval_predictions)
    files += _existing(model_dir / PLANS_JSON, model_dir / FINGERPRINT_JSON)
    # a user's trainer: its record and source copy, so the receiver can rebuild the network
    files += _existing(model_dir / TRAINER_JSON) + _files(model_dir / TRAINER_SOURCE_FOLDER)
    files.append(_required(model_dir / DATASET_JSON, DATASET_JSON))
    return files


def _matching_ensembles(results_dir: Path, request: ExportRequest) -> list[Path]:
    """Ensemble folders made only of the exported trainer/plans and requested configurations."""
    folder = ensembles_dir(results_dir)
    if not folder.is_dir():
        return []
    found = []
    for ensemble in sorted(p for p in folder.iterdir() if p.is_dir()):
        members = ensemble_member_names(ensemble.name) if is_ensemble_name(ensemble.name) else []
        if not members or not all(is_model_folder_name(m) for m in members):
            continue
        models = [TrainedModel.from_identifier(m) for m in members]
        if all(
            m.trainer == request.trainer
            and m.plans == request.plans
            and m.configuration in request.configurations
            for m in models
        ):
            found.append(ensemble)
    return found


def archive_files(results_root: Path, request: ExportRequest) -> list[Path]:
    """Every file of the archive in upstream's order (each once)."""
    results_dir = results_root / request.dataset
    files: list[Path] = []
    exported = 0
    for configuration in request.configurations:
        model_dir = trained_model_dir(results_dir, configuration, request.plans, request.trainer)
        if not model_dir.is_dir():
            if request.strict:
                msg = (
                    f"{model_dir}: no trained model of configuration {configuration} "
                    "(--not_strict skips missing configurations)"
                )
                raise ConfigurationError(msg)
            print(f"skipping configuration {configuration}: no folder {model_dir}")
            continue
        files += _model_files(model_dir, request)
        exported += 1
    if not exported:
        msg = f"{results_dir}: none of the configurations {', '.join(request.configurations)} "
        raise ConfigurationError(msg + "has a trained model; nothing to export")
    for ensemble in _matching_ensembles(results_dir, request):
        files += _summary_files(ensemble, request.crossval_predictions)
    files += _existing(
        inference_information_file(results_dir), results_dir / INFERENCE_INFORMATION_TXT
    )
    return list(dict.fromkeys(files))


def member_name(results_root: Path, path: Path) -> str:
    """The archive name of ``path``: relative to the results root, with ``/`` separators."""
    return Path(os.path.relpath(path, results_root)).as_posix()


def write_archive(results_root: Path, files: Sequence[Path], output: Path) -> None:
    """Write the zip (deflated, as upstream) beside ``output`` and rename it onto ``output``."""
    if output.is_dir():
        msg = f"-o {output}: is a folder; give the archive's file name"
        raise ConfigurationError(msg)
    with atomic_path(output, suffix=".zip") as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                name = member_name(results_root, path)
                if path.name == POSTPROCESSING_PKL and not path.is_file():
                    pickle_bytes = postprocessing_pickle(path.with_name(POSTPROCESSING_JSON))
                    archive.writestr(name, pickle_bytes, zipfile.ZIP_DEFLATED)
                else:
                    archive.write(path, name)
