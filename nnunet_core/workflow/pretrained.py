"""The workflow's ``training.pretrained_weights``: which checkpoint every fold's first attempt
starts from, found and checked while the Snakefile is parsed (before any job).

Three spellings (docs/own-data.md):

- a checkpoint file: ``pretrained_weights: /models/checkpoint_final.pth``;
- a trained model folder (``Trainer__Plans__Configuration``) and a fold:
  ``{model: /results/Dataset004_X/nnUNetTrainer__nnUNetPlans__3d_fullres, fold: 0}``, read from
  ``<model>/fold_<fold>/<checkpoint>`` (``checkpoint`` defaults to ``checkpoint_final.pth``);
- a model archive (upstream's ``nnUNetv2_export_model_to_zip`` layout, or our export) and a fold:
  the member ``DatasetXXX_Name/Trainer__Plans__Configuration/fold_<fold>/<checkpoint>`` is
  extracted (by ``python -m nnunet_core.workflow.pretrained``, the rule
  ``extract_pretrained_weights``) into ``<work_dir>/pretrained/<member>`` and read from there.

A missing file, a folder without that fold or checkpoint, or an archive without that member is a
one-line ``ConfigurationError`` naming the key and the path. Whether the weights fit the network
is only known once the plans exist: the train job says so in one line.
"""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from nnunet_core.errors import ConfigurationError, NnunetCoreError, storage_error
from nnunet_core.io.archive_limits import ArchiveLimits, check_limits
from nnunet_core.io.atomic import atomic_path
from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    CHECKPOINT_SUFFIX,
    fold_dir,
    fold_dirs_in,
    fold_folder_name,
    is_fold_folder_name,
)
from nnunet_core.layout.work import PRETRAINED_FOLDER

KEY = "training.pretrained_weights"
_MEMBER_PARTS = 4  # DatasetXXX_Name / Trainer__Plans__Configuration / fold_k / checkpoint


@dataclass(frozen=True)
class PretrainedWeights:
    """The checkpoint the train jobs read (absolute), and the archive member it comes from."""

    checkpoint: Path
    archive: Path | None = None
    member: str | None = None


def resolve_pretrained_weights(value: Any, work_dir: str | os.PathLike) -> PretrainedWeights | None:
    """``training.pretrained_weights`` as the file to train from, checked; None when unset.

    Relative paths are relative to the folder Snakemake runs in, as ``work_dir`` is.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return _checkpoint_file(Path(value))
    model = Path(value["model"]).absolute()
    fold = str(value["fold"])
    checkpoint = value.get("checkpoint") or CHECKPOINT_FINAL
    if model.is_dir():
        return _from_model_folder(model, fold, checkpoint)
    if not model.exists():
        msg = f"config {KEY}.model: {model} does not exist (a model folder or a model zip)"
        raise ConfigurationError(msg)
    return _from_archive(model, fold, checkpoint, Path(work_dir))


def _checkpoint_file(path: Path) -> PretrainedWeights:
    path = path.absolute()
    if path.is_dir():
        msg = (
            f"config {KEY}: {path} is a folder; for a model folder give "
            f"{{model: {path}, fold: <fold>}}"
        )
        raise ConfigurationError(msg)
    if not path.is_file():
        msg = f"config {KEY}: {path} does not exist"
        raise ConfigurationError(msg)
    if path.suffix == ".zip":
        msg = f"config {KEY}: {path} is a model zip; give {{model: {path}, fold: <fold>}}"
        raise ConfigurationError(msg)
    return PretrainedWeights(path)


def _from_model_folder(model: Path, fold: str, checkpoint: str) -> PretrainedWeights:
    folder = fold_dir(model, fold)
    if not folder.is_dir():
        present = ", ".join(p.name for p in fold_dirs_in(model)) or "none"
        msg = (
            f"config {KEY}.fold: {model} has no {folder.name} (its folds: {present}; model is "
            "a Trainer__Plans__Configuration folder)"
        )
        raise ConfigurationError(msg)
    path = folder / checkpoint
    if not path.is_file():
        present = ", ".join(sorted(p.name for p in folder.glob("*.pth"))) or "none"
        msg = f"config {KEY}.checkpoint: {path} does not exist (checkpoints there: {present})"
        raise ConfigurationError(msg)
    return PretrainedWeights(path)


def _from_archive(archive: Path, fold: str, checkpoint: str, work_dir: Path) -> PretrainedWeights:
    try:
        with zipfile.ZipFile(archive) as handle:
            infos = {info.filename: info for info in handle.infolist()}
            names = list(infos)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"config {KEY}.model: {archive} is neither a model folder nor a readable zip ({exc})"
        raise ConfigurationError(msg) from None
    wanted = [name for name in names if _is_checkpoint_member(name, fold, checkpoint)]
    if not wanted:
        found = sorted({n for n in names if _is_checkpoint_member(n, None, None)})
        msg = (
            f"config {KEY}: {archive} has no member */*/fold_{fold}/{checkpoint} "
            f"(its checkpoints: {', '.join(found) or 'none'})"
        )
        raise ConfigurationError(msg)
    if len(wanted) > 1:
        msg = (
            f"config {KEY}: {archive} holds fold_{fold}/{checkpoint} of {len(wanted)} models "
            f"({', '.join(wanted)}); install it (nnunet-core install-pretrained-model-from-zip) "
            "and give the model folder"
        )
        raise ConfigurationError(msg)
    member = wanted[0]
    _check_member_size(archive, infos[member])
    target = (work_dir / PRETRAINED_FOLDER / member).absolute()
    return PretrainedWeights(target, archive, member)


def _check_member_size(archive: Path, info: zipfile.ZipInfo) -> None:
    """The checkpoint to extract within the install command's default limits (a zip bomb posing
    as a checkpoint would fill work_dir): its declared size and compression ratio."""
    try:
        check_limits(
            archive,
            [info],
            ArchiveLimits(),
            how_to_raise="install the zip with nnunet-core install-pretrained-model-from-zip, "
            "whose flags raise it, and give the model folder",
            outcome="nothing was extracted",
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"config {KEY}.model: {exc}") from None


def _is_checkpoint_member(name: str, fold: str | None, checkpoint: str | None) -> bool:
    """``Dataset/Model/fold_<fold>/<checkpoint>``; no absolute path, no ``..`` (a hostile zip
    must not write outside ``work_dir/pretrained``)."""
    parts = PurePosixPath(name).parts
    if len(parts) != _MEMBER_PARTS or name.startswith("/") or ".." in parts:
        return False
    if not is_fold_folder_name(parts[2]) or not parts[3].endswith(CHECKPOINT_SUFFIX):
        return False
    return (fold is None or parts[2] == fold_folder_name(fold)) and (
        checkpoint is None or parts[3] == checkpoint
    )


def extract_member(archive: str | os.PathLike, member: str, target: str | os.PathLike) -> None:
    """Copy one archive member to ``target`` atomically (a killed extraction leaves nothing the
    train jobs could read as a checkpoint); a corrupt or missing member is a one-line error."""
    try:
        with zipfile.ZipFile(archive) as handle, atomic_path(target) as tmp:
            with handle.open(member) as source, open(tmp, "wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as exc:  # KeyError: no such member
        msg = f"{archive}: cannot extract {member} ({exc})"
        raise ConfigurationError(msg) from None
    except OSError as exc:  # a full or read-only disk: one line naming the file
        error = storage_error(exc, Path(target).parent)
        if error is None:
            raise
        raise error from exc


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m nnunet_core.workflow.pretrained ARCHIVE MEMBER TARGET`` (the workflow's
    extraction job): an error is one line, with the exit code of its kind."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3:
        usage = "usage: python -m nnunet_core.workflow.pretrained ARCHIVE MEMBER TARGET"
        print(usage, file=sys.stderr)
        return 2
    try:
        extract_member(*args)
    except NnunetCoreError as exc:
        print(f"extract pretrained weights: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"extracted {args[1]} of {args[0]} to {args[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
