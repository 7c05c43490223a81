"""Exceptions that the command line turns into one-line messages and exit codes."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator


class NnunetCoreError(Exception):
    """Base class: an error the user can act on; the CLI prints it as one line."""

    exit_code = 1


class DatasetError(NnunetCoreError):
    """The raw dataset is broken (names the case and the problem)."""

    exit_code = 2


class ConfigurationError(NnunetCoreError):
    """A plans file, a configuration name or an option is wrong."""

    exit_code = 2


class UserCodeError(ConfigurationError):
    """A user's own code (a trainer file, its class, one of its hooks) failed: a second attempt
    would fail the same way, so the workflow does not retry it (``cluster.exit_codes``). A kind
    of ConfigurationError (the user named that code), so the checks that catch one catch both."""

    exit_code = 3


# A write the file system refused for lack of room or of write access: the command stops with one
# line naming the file (``StorageError``, exit 4) instead of a traceback, and with nothing torn
# (atomic writes remove their temporary file; the previous version of the target stays).
STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
}


class StorageError(NnunetCoreError):
    """The disk is full, over quota or read-only (names the file that could not be written)."""

    exit_code = 4


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then what it was raised from or while handling, oldest last."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ if exc.__cause__ is not None else exc.__context__


def storage_cause(exc: BaseException) -> OSError | None:
    """The refused write behind ``exc`` (an ``OSError`` with an errno of ``STORAGE_ERRNOS``
    anywhere in its chain: torch wraps it in a RuntimeError), else None.

    The oldest one that names its file wins: it is the original failure, and a file name is what
    the user needs; later ones come from clean-up code that ran into the same full disk.
    """
    found = [e for e in _chain(exc) if isinstance(e, OSError) and e.errno in STORAGE_ERRNOS]
    named = [e for e in found if e.filename]
    return (named or found or [None])[-1]


def storage_error(
    exc: BaseException, where: str | os.PathLike | None = None, advice: str = ""
) -> StorageError | None:
    """``exc`` as the one-line StorageError (``no space left on device writing <path>``), or None
    when no refused write is behind it. ``where``: the folder named when the failed call did not
    say which file (a ``write`` or ``close`` does not)."""
    cause = storage_cause(exc)
    if cause is None:
        return None
    path = cause.filename or (f"in {where}" if where is not None else "a file")
    message = f"{STORAGE_ERRNOS[cause.errno]} writing {path}"
    return StorageError(f"{message}; {advice}" if advice else message)
