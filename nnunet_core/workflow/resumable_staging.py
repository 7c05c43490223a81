"""A prediction job's staging folder, kept across attempts while what it predicts is unchanged.

A rule that writes a folder writes it as ``<folder>.partial`` and renames it when its command
succeeded. A job killed half-way used to lose every case it had written: the next attempt removed
the staging folder. Now the folder records a key (``<staging>.key``, beside it): the job's
settings and the size and time of every input file. The next attempt keeps the folder when the
key is the same, so ``nnunet-core predict --continue_prediction`` predicts only the missing cases
(each case's files are written atomically: present means whole); with another key (a fold trained
again, another selection, other settings) the folder goes and every case is predicted again.

    python -m nnunet_core.workflow.resumable_staging prepare --inside P --key TEXT STAGING INPUT...
    python -m nnunet_core.workflow.resumable_staging finish --inside P STAGING OUTPUT
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from nnunet_core.errors import NnunetCoreError
from nnunet_core.io.atomic import remove_atomic_temporaries, write_text
from nnunet_core.io.removal import confined_path, remove_file, remove_tree

KEY_SUFFIX = ".key"


def key_file(staging: Path) -> Path:
    return staging.with_name(staging.name + KEY_SUFFIX)


def _files(path: Path) -> Iterable[Path]:
    if path.is_dir():
        yield from sorted(p for p in path.rglob("*") if p.is_file())
    elif path.exists():
        yield path


def staging_key(settings: str, inputs: Sequence[str | os.PathLike]) -> str:
    """sha256 over the job's settings and each input file's path, size and modification time."""
    digest = hashlib.sha256(settings.encode())
    for given in inputs:
        for path in _files(Path(given)):
            info = path.stat()
            digest.update(f"\0{path}\0{info.st_size}\0{info.st_mtime_ns}".encode())
    return digest.hexdigest()


def prepare(staging: Path, inside: Path, key: str) -> bool:
    """Keep ``staging`` when its recorded key is ``key`` (True), else remove it and record ``key``
    for the attempt about to write it. A kept folder loses the temporaries of the writes the
    killed attempt did not finish (only this job writes there), which would otherwise reach the
    finished folder."""
    recorded = key_file(staging)
    kept = staging.is_dir() and recorded.is_file() and recorded.read_text().strip() == key
    if kept:
        remove_atomic_temporaries(staging)
    else:
        remove_tree(staging, inside=[inside])
        write_text(recorded, key + "\n")
    return kept


def finish(staging: Path, output: Path, inside: Path) -> None:
    """The complete folder into place, and its key gone."""
    confined_path(output, [inside])
    os.replace(staging, output)
    remove_file(key_file(staging), inside=[inside])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nnunet_core.workflow.resumable_staging")
    commands = parser.add_subparsers(dest="command", required=True)
    first = commands.add_parser("prepare")
    first.add_argument("--inside", type=Path, required=True)
    first.add_argument("--key", default="")
    first.add_argument("staging", type=Path)
    first.add_argument("inputs", nargs="*")
    last = commands.add_parser("finish")
    last.add_argument("--inside", type=Path, required=True)
    last.add_argument("staging", type=Path)
    last.add_argument("output", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "finish":
            finish(args.staging, args.output, args.inside)
            return 0
        key = staging_key(args.key, args.inputs)
        if prepare(args.staging, args.inside, key):
            print(f"{args.staging}: continuing the last attempt's cases", file=sys.stderr)
    except NnunetCoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
