"""Atomic writes: a reader never sees a half-written result, a crash leaves the old file intact."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np


@contextmanager
def atomic_path(target: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success.

    The temporary file lives in the same folder so that ``os.replace`` is atomic.
    On an exception the temporary file is removed and ``target`` is untouched.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        if tmp.is_file():
            _fsync_file(tmp)
            os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def current_umask() -> int:
    # mkstemp creates files 0600; results should get the permissions any new file gets.
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    msg = f"cannot write {type(value).__name__} to JSON: {value!r}"
    raise TypeError(msg)


def write_json(target: str | os.PathLike, obj: Any, *, sort_keys: bool = False) -> None:
    """Write ``obj`` as indented JSON, atomically. Key order is kept (regions depend on it)."""
    with atomic_path(target, suffix=".json") as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(obj, handle, indent=4, sort_keys=sort_keys, default=_json_default)
            handle.write("\n")


def write_text(target: str | os.PathLike, text: str) -> None:
    """Write a text file atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
