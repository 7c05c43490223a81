"""Installing a model archive into a results root without ever leaving half of it there, and
without changing an installed model silently.

Upstream (``install_model_from_zip_file``) calls ``extractall`` into ``nnUNet_results``. Before
anything is extracted we check every member name (no absolute path, no ``..``: an archive writes
only below the root), the declared sizes (``archive_limits``: a zip bomb is refused) and where the
archive brings trainer code (``install_changes``: never into a built-in trainer's model folder,
never into an installed folder without a record). Then the archive is unpacked into a hidden
locked folder inside the root (``install_staging``: same file system, so moves are renames; a
killed install's folder is removed by the next install), compared with what is installed (a file
replaced with other bytes is refused unless ``overwrite``, and then listed) and, when every
member came out intact (CRC checked, never more bytes than declared), moved into place
(``io.atomic.merge_folder``): a folder the root does not have yet is renamed in whole, an
existing one is merged file by file with ``os.replace``; other files stay.
Nothing is unpickled: members are copied as bytes.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from nnunet_core.errors import STORAGE_ERRNOS, ConfigurationError
from nnunet_core.extension.consent import CarriedCode
from nnunet_core.io.archive_limits import ArchiveLimits, check_limits
from nnunet_core.io.atomic import merge_folder
from nnunet_core.model_sharing.install_changes import (
    carried_code,
    check_code_members,
    replaced_files,
    type_conflict,
)
from nnunet_core.model_sharing.install_staging import (
    STAGING_PREFIX,
    remove_stale_staging,
    staging_folder,
)

_DRIVE = re.compile(r"^[A-Za-z]:")
_BLOCK = 1 << 20


def unsafe_reason(name: str) -> str | None:
    """Why the member ``name`` would land outside the folder it is unpacked into, else None."""
    if name.startswith(("/", "\\")) or _DRIVE.match(name):
        return "is an absolute path"
    parts = re.split(r"[/\\]", name)
    if ".." in parts:
        return "climbs out of the results folder with '..'"
    if not any(part not in ("", ".") for part in parts):
        return "names no file"
    if "\x00" in name:
        return "holds a NUL character"
    if next(p for p in parts if p not in ("", ".")).startswith(STAGING_PREFIX):
        return f"uses the name of an install's staging folder ({STAGING_PREFIX}*)"
    return None


def _members(archive: Path, handle: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    infos = handle.infolist()
    for info in infos:
        reason = unsafe_reason(info.filename)
        if reason is not None:
            msg = f"{archive}: member {info.filename!r} {reason}; nothing was installed"
            raise ConfigurationError(msg)
    if not any(not info.is_dir() for info in infos):
        msg = f"{archive}: the archive holds no files; nothing was installed"
        raise ConfigurationError(msg)
    return infos


def _unpack(archive: Path, handle: zipfile.ZipFile, infos: list[zipfile.ZipInfo], into: Path):
    for info in infos:
        target = into / info.filename
        try:
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with handle.open(info) as source, open(target, "wb") as sink:
                _copy_declared(archive, info, source, sink)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
            msg = f"{archive}: member {info.filename!r} is corrupt ({exc}); nothing was installed"
            raise ConfigurationError(msg) from None
        except OSError as exc:  # a file and a folder of the same name in the archive
            if exc.errno in STORAGE_ERRNOS:
                raise
            msg = (
                f"{archive}: member {info.filename!r} cannot be unpacked "
                f"({exc.strerror or exc}); nothing was installed"
            )
            raise ConfigurationError(msg) from None


def _copy_declared(archive: Path, info: zipfile.ZipInfo, source: BinaryIO, sink: BinaryIO) -> None:
    """Copy the member, never more than its declared size (``zipfile`` stops there too)."""
    left = info.file_size
    while block := source.read(min(_BLOCK, left + 1)):
        if len(block) > left:
            msg = (
                f"{archive}: member {info.filename!r} holds more than the {info.file_size} bytes "
                "its header declares; nothing was installed"
            )
            raise ConfigurationError(msg)
        sink.write(block)
        left -= len(block)


@dataclass
class Installed:
    """What an install did: top-level entries, files it replaced (``overwrite``), the trainer
    code its models carry, and killed installs' staging folders it removed."""

    names: list[str]
    replaced: list[Path] = field(default_factory=list)
    carried: list[CarriedCode] = field(default_factory=list)
    removed_staging: list[Path] = field(default_factory=list)


def _open(archive: Path) -> zipfile.ZipFile:
    if not archive.is_file():
        what = "is a folder, not a zip archive" if archive.is_dir() else "no such file"
        msg = f"{archive}: {what}"
        raise ConfigurationError(msg)
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"{archive}: not a readable zip archive ({exc})"
        raise ConfigurationError(msg) from None


def _refuse_replacing(archive: Path, replaced: list[Path], results_root: Path) -> None:
    shown = ", ".join(str(p.relative_to(results_root)) for p in replaced[:3])
    more = f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
    msg = (
        f"{archive}: would replace {len(replaced)} installed file(s) of {results_root} with "
        f"other content ({shown}{more}); nothing was installed (--overwrite replaces them and "
        "lists each)"
    )
    raise ConfigurationError(msg)


def install_archive(
    archive: Path,
    results_root: Path,
    *,
    overwrite: bool = False,
    limits: ArchiveLimits | None = None,
) -> Installed:
    """Unpack ``archive`` into ``results_root``; see the module docstring for what is refused."""
    with _open(archive) as handle:
        infos = _members(archive, handle)
        check_limits(archive, infos, limits or ArchiveLimits())
        code_folders = check_code_members(archive, infos, results_root)
        removed = remove_stale_staging(results_root)
        with staging_folder(results_root) as staging:
            tree = staging.tree
            _unpack(archive, handle, infos, tree)
            conflict = type_conflict(tree, results_root)
            if conflict:
                msg = f"{archive}: {conflict}; nothing was installed"
                raise ConfigurationError(msg)
            replaced = replaced_files(tree, results_root)
            if replaced and not overwrite:
                _refuse_replacing(archive, replaced, results_root)
            carried = carried_code(archive, tree, results_root, code_folders)
            names = sorted(p.name for p in tree.iterdir())
            merge_folder(tree, results_root)
    return Installed(names, replaced, carried, removed)
