"""The hidden folder an install unpacks into, and removing those that killed installs left.

An archive is unpacked into ``<results>/.install-<host>-<pid>-<random>/tree`` (same file system
as the results, so installing is renames) and the folder is deleted afterwards. A killed install
leaves it behind, possibly gigabytes; the next install removes it. An install still running
beside it must keep its own: each holds a lock (``io.locks``) on ``<staging>/install.lock`` for as
long as the folder exists (the kernel releases it when the process dies, also on a kill). A
folder is removed only when its lock can be taken (one killed before taking it gets one then) and
either its name's process is gone from this host or the folder is older than
``CREATION_GRACE_S`` (which covers the instant between a live install creating the folder and
locking it). Deletion goes through ``io.removal`` (confined to the results folder).
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from nnunet_core.errors import STORAGE_ERRNOS, ConfigurationError
from nnunet_core.io.locks import UnsafeLockError, open_lock_file, try_lock
from nnunet_core.io.removal import remove_tree

STAGING_PREFIX = ".install-"
LOCK_NAME = "install.lock"
TREE_NAME = "tree"
CREATION_GRACE_S = 60.0
# mkdtemp's random part is [a-z0-9_]; the host has '-' replaced, so the name splits unambiguously
_NAME = re.compile(rf"^{re.escape(STAGING_PREFIX)}(?P<host>[A-Za-z0-9._]+)-(?P<pid>[0-9]+)-\w+$")


@dataclass(frozen=True)
class Staging:
    """An install's own staging folder; ``tree`` receives the archive's members."""

    folder: Path
    tree: Path


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: running
        return False
    return False


def _is_stale(folder: Path) -> bool:
    """For a folder whose lock we hold or that has none: stale when its process is gone from
    this host or it is older than the creation grace."""
    match = _NAME.match(folder.name)
    if match is None:
        return False
    if match["host"] == _host() and int(match["pid"]) != os.getpid():
        if _process_gone(int(match["pid"])):
            return True
    try:
        age = time.time() - folder.lstat().st_mtime
    except FileNotFoundError:
        return False
    return age > CREATION_GRACE_S


def remove_stale_staging(results_root: Path) -> list[Path]:
    """Delete the staging folders of installs that are no longer running; the ones deleted."""
    removed: list[Path] = []
    if not results_root.is_dir():
        return removed
    for folder in sorted(results_root.glob(f"{STAGING_PREFIX}*")):
        if folder.is_symlink() or not folder.is_dir() or not _NAME.match(folder.name):
            continue  # not one of ours: left alone
        try:  # a folder without its lock (killed before taking it) gets one here
            handle = open_lock_file(folder / LOCK_NAME)
        except (OSError, UnsafeLockError):  # a link planted as the lock: not ours to judge
            continue
        with handle:
            if not try_lock(handle):
                continue  # an install is running in it
            if _is_stale(folder) and remove_tree(folder, inside=[results_root]):
                removed.append(folder)
    return removed


def _create(results_root: Path) -> tuple[Staging, IO[str]]:
    try:
        results_root.mkdir(parents=True, exist_ok=True)
        prefix = f"{STAGING_PREFIX}{_host()}-{os.getpid()}-"
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=results_root))
        handle = open_lock_file(folder / LOCK_NAME)
        try_lock(handle)  # a fresh folder: nobody else holds it
        tree = folder / TREE_NAME
        tree.mkdir()
    except OSError as exc:
        if exc.errno in STORAGE_ERRNOS:
            raise
        msg = f"results folder {results_root}: cannot write into it ({exc.strerror or exc})"
        raise ConfigurationError(msg) from None
    return Staging(folder, tree), handle


@contextmanager
def staging_folder(results_root: Path) -> Iterator[Staging]:
    """A fresh locked staging folder in ``results_root``, deleted (then unlocked) on exit."""
    staging, handle = _create(results_root)
    with handle:
        try:
            yield staging
        finally:
            with suppress(OSError):
                remove_tree(staging.folder, inside=[results_root])
