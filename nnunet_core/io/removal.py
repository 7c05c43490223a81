"""Deleting only inside the folders a run owns: the one way files and folders are removed.

A path built from a config value (``work_dir: "/data/wd mv"``) that a shell split, or a staging
folder that resolves through a symlink, must never take a user's folder with it. Every removal
names the folders it may happen in (``inside``); the path is resolved (its parent through
symlinks, the last component as it is, so a link is removed, never what it points to) and must lie
strictly below one of them: the folder itself, a folder above it, or anything beside it is refused
with one line, and nothing is deleted.

``python -m nnunet_core.io.removal --inside ROOT PATH...`` is the same for the workflow's rules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from nnunet_core.errors import ConfigurationError


def _forbidden_roots() -> tuple[Path, ...]:
    """Folders nothing is ever deleted in as a root, nor deleted itself: ``/`` and the home
    folder (read at each call: ``$HOME`` may change)."""
    return (Path("/"), Path.home().resolve())


def _located(path: Path) -> Path:
    """``path`` made absolute with its parent resolved; the last component is kept as named."""
    absolute = Path(os.path.abspath(path))
    if absolute.parent == absolute:  # "/"
        return absolute
    return absolute.parent.resolve() / absolute.name


def confined_path(path: str | os.PathLike, inside: Iterable[str | os.PathLike]) -> Path:
    """``path`` located as above, if it lies strictly inside one of ``inside``; else one-line
    ConfigurationError naming the path and the folders it may be removed from."""
    roots = [Path(root).resolve() for root in inside]
    if not roots:
        msg = f"refusing to delete {path}: no folder of the run to delete in was named"
        raise ConfigurationError(msg)
    located = _located(Path(path))
    forbidden = _forbidden_roots()
    if any(located == f or f.is_relative_to(located) for f in forbidden):
        msg = (
            f"refusing to delete {path}: it is {located}, the file system's root, the home "
            "folder or a folder above it"
        )
        raise ConfigurationError(msg)
    for root in roots:
        if root in forbidden:
            continue
        if located != root and located.is_relative_to(root):
            return located
    allowed = ", ".join(str(root) for root in roots)
    named = Path(os.path.abspath(path))
    resolved = f" (it is {located})" if located != named else ""
    msg = f"refusing to delete {path}{resolved}: it is not inside the run's folders ({allowed})"
    raise ConfigurationError(msg)


def remove_tree(path: str | os.PathLike, *, inside: Iterable[str | os.PathLike]) -> bool:
    """Delete the folder (or file, or link) ``path`` if it exists and is confined to ``inside``;
    True when something was deleted. A link is unlinked, never followed."""
    located = confined_path(path, inside)
    if located.is_symlink() or located.is_file():
        located.unlink()
        return True
    if not located.exists():
        return False
    shutil.rmtree(located)
    return True


def remove_file(path: str | os.PathLike, *, inside: Iterable[str | os.PathLike]) -> bool:
    """Delete the file (or link) ``path`` if it exists and is confined; a folder is refused."""
    located = confined_path(path, inside)
    if located.is_dir() and not located.is_symlink():
        msg = f"refusing to delete {path}: it is a folder, not a file"
        raise ConfigurationError(msg)
    try:
        located.unlink()
    except FileNotFoundError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nnunet_core.io.removal",
        description="delete folders or files, only inside the named folders",
    )
    parser.add_argument(
        "--inside", action="append", required=True, help="a folder of the run (repeatable)"
    )
    parser.add_argument("paths", nargs="+", help="what to delete (missing ones are skipped)")
    args = parser.parse_args(argv)
    try:
        for path in args.paths:
            remove_tree(path, inside=args.inside)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ConfigurationError.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
