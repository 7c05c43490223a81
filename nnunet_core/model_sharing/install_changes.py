"""What installing an archive would change in the results root, judged before anything moves.

Installing never changes an installed model silently: a member that would replace a file of the
results root with other bytes is refused unless the user passes ``--overwrite`` (then each is
listed); a byte-identical file is no change (reinstalling the same zip is allowed). Trainer code
(``trainer.json``, ``trainer_source/``) is what predicting may run, so an archive may bring it
only into a model folder of a user's trainer: never into a folder named for a built-in trainer
(``nnUNetTrainer__nnUNetPlans__3d_fullres``: its network is ours and it carries no code), and
never into an installed folder that has no ``trainer.json`` (``--overwrite`` or not). The code an
archive carries must be the file its record was written for (sha256).
"""

from __future__ import annotations

import filecmp
import zipfile
from collections.abc import Sequence
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import CarriedCode, verified_code
from nnunet_core.extension.trainer_record import read_record
from nnunet_core.layout.results import (
    TRAINER_JSON,
    TRAINER_SOURCE_FOLDER,
    TrainedModel,
    is_model_folder_name,
)
from nnunet_core.training.trainer.lookup import is_builtin_trainer


def code_folder(name: str) -> tuple[str, ...] | None:
    """The folder (parts below the root) whose trainer code the member ``name`` is; None when
    the member is no trainer code."""
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if (part == TRAINER_JSON and last) or part == TRAINER_SOURCE_FOLDER:
            return parts[:index]
    return None


def check_code_members(
    archive: Path, infos: Sequence[zipfile.ZipInfo], results_root: Path
) -> list[tuple[str, ...]]:
    """The folders the archive brings trainer code into; a one-line refusal for a built-in
    trainer's folder or an installed folder without a record."""
    folders: dict[tuple[str, ...], None] = {}
    for info in infos:
        folder = code_folder(info.filename)
        if folder is None:
            continue
        name = folder[-1] if folder else ""
        if is_model_folder_name(name):
            trainer = TrainedModel.from_identifier(name).trainer
            if is_builtin_trainer(trainer):
                msg = (
                    f"{archive}: member {info.filename!r} brings trainer code into {name}, a "
                    f"model of the built-in trainer {trainer}, which carries none; nothing was "
                    "installed"
                )
                raise ConfigurationError(msg)
        installed = results_root.joinpath(*folder)
        if installed.is_dir() and not (installed / TRAINER_JSON).is_file():
            msg = (
                f"{archive}: member {info.filename!r} would add trainer code to the installed "
                f"folder {installed}, which has none; nothing was installed"
            )
            raise ConfigurationError(msg)
        folders[folder] = None
    return list(folders)


def replaced_files(tree: Path, results_root: Path) -> list[Path]:
    """The files of ``results_root`` that the unpacked ``tree`` would replace with other bytes."""
    replaced: list[Path] = []
    for entry in sorted(tree.rglob("*")):
        if entry.is_dir():
            continue
        there = results_root / entry.relative_to(tree)
        if there.is_symlink() or (there.is_file() and not filecmp.cmp(entry, there, False)):
            replaced.append(there)
    return replaced


def type_conflict(source: Path, target: Path) -> str | None:
    """A path where the archive has a folder and the root a file, or the other way round."""
    for entry in source.iterdir():
        there = target / entry.name
        if not there.exists():
            continue
        if entry.is_dir() != there.is_dir():
            kind = "a folder" if entry.is_dir() else "a file"
            return f"{there} is in the archive as {kind} but is not one in the results folder"
        if entry.is_dir():
            found = type_conflict(entry, there)
            if found:
                return found
    return None


def carried_code(
    archive: Path, tree: Path, results_root: Path, folders: Sequence[tuple[str, ...]]
) -> list[CarriedCode]:
    """The trainer code each folder will carry once installed (the archive's record and file
    where it brings them, else the installed ones), its sha256 checked against the record."""
    carried: list[CarriedCode] = []
    for folder in folders:
        staged, installed = tree.joinpath(*folder), results_root.joinpath(*folder)
        holder = staged if (staged / TRAINER_JSON).is_file() else installed
        try:
            record = read_record(holder)
            if record is None:  # trainer_source/ without a record: never loaded
                continue
            source = staged / TRAINER_SOURCE_FOLDER / Path(str(record.get("source", ""))).name
            code = verified_code(installed, record, source if source.is_file() else None)
        except ConfigurationError as exc:
            shown = str(exc).replace(str(tree), "<archive>")
            msg = f"{archive}: {shown}; nothing was installed"
            raise ConfigurationError(msg) from None
        carried.append(code)
    return carried
