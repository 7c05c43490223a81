"""Installing a model archive into a results root without ever leaving half of it there.

Upstream (``install_model_from_zip_file``) calls ``extractall`` into ``nnUNet_results``. We check
every member name first (no absolute path, no ``..``: an archive writes only below the root),
unpack into a hidden folder inside the root (same file system, so moves are renames), and only
when every member came out intact (CRC checked) move the result into place
(``io.atomic.merge_folder``): a folder the root does not have yet is renamed in whole, an
existing one is merged file by file with ``os.replace`` (files the archive brings replace the
installed ones, as upstream's overwrite; other files stay).
Nothing is unpickled: members are copied as bytes.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
import zlib
from contextlib import suppress
from pathlib import Path

from nnunet_core.errors import STORAGE_ERRNOS, ConfigurationError
from nnunet_core.io.atomic import merge_folder

_DRIVE = re.compile(r"^[A-Za-z]:")
_UNPACK_PREFIX = ".install-"


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
                shutil.copyfileobj(source, sink)
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


def _conflicts(source: Path, target: Path) -> str | None:
    """A path where the archive has a folder and the root a file, or the other way round."""
    for entry in source.iterdir():
        there = target / entry.name
        if not there.exists():
            continue
        if entry.is_dir() != there.is_dir():
            kind = "a folder" if entry.is_dir() else "a file"
            return f"{there} is in the archive as {kind} but is not one in the results folder"
        if entry.is_dir():
            found = _conflicts(entry, there)
            if found:
                return found
    return None


def _staging_folder(results_root: Path) -> Path:
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=_UNPACK_PREFIX, dir=results_root))
    except OSError as exc:
        if exc.errno in STORAGE_ERRNOS:
            raise
        msg = f"results folder {results_root}: cannot write into it ({exc.strerror or exc})"
        raise ConfigurationError(msg) from None


def install_archive(archive: Path, results_root: Path) -> list[str]:
    """Unpack ``archive`` into ``results_root``; the names of the top-level entries installed."""
    if not archive.is_file():
        what = "is a folder, not a zip archive" if archive.is_dir() else "no such file"
        msg = f"{archive}: {what}"
        raise ConfigurationError(msg)
    try:
        handle = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        msg = f"{archive}: not a readable zip archive ({exc})"
        raise ConfigurationError(msg) from None
    with handle:
        infos = _members(archive, handle)
        staging = _staging_folder(results_root)
        try:
            _unpack(archive, handle, infos, staging)
            conflict = _conflicts(staging, results_root)
            if conflict:
                msg = f"{archive}: {conflict}; nothing was installed"
                raise ConfigurationError(msg)
            installed = sorted(p.name for p in staging.iterdir())
            merge_folder(staging, results_root)
        finally:
            with suppress(OSError):
                shutil.rmtree(staging)
    return installed
