"""What ``predict.model`` names, resolved to the model folders a prediction runs.

The value may be a model zip (installed aside into ``work_dir``, never into the user's
``nnUNet_results``), an ``https://`` URL of one (downloaded once into ``work_dir``), a model
folder (``<trainer>__<plans>__<configuration>``, ours or upstream's), a results dataset folder
(``results/<Dataset>``: what its ``inference_information.json`` selected, the configuration or the
ensemble, its folds and its postprocessing) or a results root holding one dataset. A lone model
folder predicts with the folds it has, and with the postprocessing its cross-validation chose for
those folds when it has one. Nothing here imports torch: the Snakefile resolves the model while it
builds the jobs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.extension.consent import file_sha256
from nnunet_core.layout.new_scans import installed_model_dir
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    DEFAULT_TRAINER,
    PLANS_JSON,
    POSTPROCESSING_JSON,
    available_folds,
    crossval_dir,
    fold_dir,
    inference_information_file,
    is_model_folder_name,
    parse_fold,
    trained_model_dir,
)
from nnunet_core.layout.roots import DATASET_NAME_RE

KEY = "predict.model"
Fold = int | str


@dataclass(frozen=True)
class Member:
    """One model folder of the prediction and the folds it averages."""

    model_dir: Path
    folds: tuple[Fold, ...]


@dataclass(frozen=True)
class ScanModel:
    """The members (one, or an ensemble's), the postprocessing to apply and what identifies them
    (a changed checkpoint, plans or postprocessing changes ``identity``)."""

    members: tuple[Member, ...]
    postprocessing: Path | None
    description: str
    identity: tuple[Any, ...]


def resolve_model(value: str, work_dir: Path, folds: Sequence[Fold] | None = None) -> ScanModel:
    """``predict.model`` as a ScanModel; one-line ConfigurationError naming what is wrong."""
    if value.startswith(("https://", "http://")):
        from nnunet_core.layout.new_scans import download_path
        from nnunet_core.model_sharing.download import cached_download, url_sha256

        archive = cached_download(value, download_path(work_dir, url_sha256(value)).parent)
        return _from_archive(archive, work_dir, folds, shown=value)
    path = Path(value).expanduser()
    if not path.exists():
        msg = f"{KEY}: {value} not found (a model zip, a model folder or a results folder)"
        raise ConfigurationError(msg)
    if path.is_file():
        return _from_archive(path, work_dir, folds, shown=str(path))
    return _from_folder(path, folds)


def _from_archive(archive: Path, work_dir: Path, folds: Sequence[Fold] | None, shown: str):
    import zipfile

    if not zipfile.is_zipfile(archive):
        msg = f"{KEY}: {shown} is neither a folder nor a zip archive"
        raise ConfigurationError(msg)
    sha256 = file_sha256(archive)
    root = install_aside(archive, installed_model_dir(work_dir, sha256))
    model = _from_folder(root, folds)
    description = f"{shown} (installed in {root})"
    return ScanModel(
        model.members, model.postprocessing, description, ("zip", sha256, *model.identity)
    )


def install_aside(archive: Path, root: Path) -> Path:
    """Unpack ``archive`` into its own results root ``root`` once (under a lock: several
    Snakemake processes resolve the model at the same time); complete or absent."""
    if root.is_dir():
        return root
    from nnunet_core.model_sharing.install import install_archive

    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if root.is_dir():
            return root
        partial = root.parent / f".{root.name}.installing"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        print(f"installing {archive} into {root}", flush=True)
        install_archive(archive, partial)
        os.rename(partial, root)
    return root


def _is_model_folder(path: Path) -> bool:
    return (path / PLANS_JSON).is_file() and (path / DATASET_JSON).is_file()


def _from_folder(path: Path, folds: Sequence[Fold] | None) -> ScanModel:
    if _is_model_folder(path):
        return _single(path, folds)
    if inference_information_file(path).is_file():
        return _selected(path, folds)
    model = _only_child(path, is_model_folder_name, "models", " and no selection; name one")
    if model is not None:
        return _single(model, folds)
    dataset = _only_child(path, DATASET_NAME_RE.match, "datasets", "; name one of them")
    if dataset is not None:
        return _from_folder(dataset, folds)
    msg = f"{KEY}: {path} is no model folder (no {PLANS_JSON}), results folder or model zip"
    raise ConfigurationError(msg)


def _only_child(path: Path, named: Callable[[str], object], kind: str, hint: str) -> Path | None:
    """The one subfolder of ``path`` whose name ``named`` accepts; None when there is none, a
    one-line error naming them when there are several."""
    found = sorted(p for p in path.iterdir() if p.is_dir() and named(p.name))
    if len(found) > 1:
        msg = f"{KEY}: {path} holds several {kind} ({', '.join(p.name for p in found)}){hint}"
        raise ConfigurationError(msg)
    return found[0] if found else None


def _trained_folds(model_dir: Path, folds: Sequence[Fold] | None) -> tuple[Fold, ...]:
    """``folds`` (each must have its final checkpoint), else every fold that has one."""
    if folds is not None:
        wanted = tuple(parse_fold(f) for f in folds)
        missing = [f for f in wanted if not (fold_dir(model_dir, f) / CHECKPOINT_FINAL).is_file()]
        if missing:
            msg = f"{KEY}: {model_dir} has no {CHECKPOINT_FINAL} for fold(s) {missing}"
            raise ConfigurationError(msg)
        return wanted
    found = available_folds(model_dir)
    if not found:
        msg = f"{KEY}: {model_dir} has no trained fold (fold_<k>/{CHECKPOINT_FINAL})"
        raise ConfigurationError(msg)
    return tuple(found)


def _single(model_dir: Path, folds: Sequence[Fold] | None) -> ScanModel:
    chosen = _trained_folds(model_dir, folds)
    postprocessing = crossval_dir(model_dir, chosen) / POSTPROCESSING_JSON
    pp = postprocessing if postprocessing.is_file() else None
    member = Member(model_dir, chosen)
    shown = f"{model_dir} folds {', '.join(map(str, chosen))}"
    return ScanModel((member,), pp, shown, _identity((member,), pp))


def _selected(results_dir: Path, folds: Sequence[Fold] | None) -> ScanModel:
    """What ``find-best-config`` selected in ``results_dir``: members, folds, postprocessing."""
    path = inference_information_file(results_dir)
    selection = read_inference_information(path, ConfigurationError, needs_winner=True)
    best = selection["best_model_or_ensemble"]
    chosen = folds if folds is not None else selection.get("folds")
    members = []
    for entry in best["selected_model_or_models"]:
        model_dir = trained_model_dir(
            results_dir,
            entry["configuration"],
            entry.get("plans_identifier", DEFAULT_PLANS_NAME),
            entry.get("trainer", DEFAULT_TRAINER),
        )
        if not model_dir.is_dir():
            msg = f"{path}: selects {model_dir.name}, which {results_dir} does not have"
            raise ConfigurationError(msg)
        members.append(Member(model_dir, _trained_folds(model_dir, chosen)))
    pp = _selected_postprocessing(results_dir, best["postprocessing_file"])
    names = " + ".join(m.model_dir.name for m in members)
    shown = f"{results_dir}: {names} as selected ({best.get('identifier', names)})"
    return ScanModel(tuple(members), pp, shown, _identity(tuple(members), pp))


def _selected_postprocessing(results_dir: Path, recorded: str) -> Path:
    """The selection's postprocessing.json: where it was written, else the same folder and file
    inside ``results_dir`` (a tree moved or unpacked elsewhere); a pickle is read as its JSON
    twin (pickles are never opened)."""
    named = Path(recorded)
    if named.suffix == ".pkl":
        named = named.with_suffix(".json")
    candidates = [named, *(results_dir / Path(*named.parts[-n:]) for n in (2, 3))]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    msg = f"{inference_information_file(results_dir)}: its postprocessing file {named} is missing"
    raise ConfigurationError(msg)


def _identity(members: tuple[Member, ...], postprocessing: Path | None) -> tuple[Any, ...]:
    """What a changed model changes: each checkpoint's size and time, the plans', dataset.json's
    and postprocessing's bytes."""
    parts: list[Any] = []
    for member in members:
        parts.append(str(member.model_dir.resolve()))
        for name in (PLANS_JSON, DATASET_JSON):
            parts.append(file_sha256(member.model_dir / name))
        for fold in member.folds:
            status = (fold_dir(member.model_dir, fold) / CHECKPOINT_FINAL).stat()
            parts.append((str(fold), status.st_size, status.st_mtime_ns))
    parts.append(None if postprocessing is None else file_sha256(postprocessing))
    return tuple(parts)
