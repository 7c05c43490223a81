"""A probe's sandbox: a fresh folder with a decoy tree of user files beside and above the run's
folders, the marker a hostile value tries to create, and the before/after picture of the tree.

A probe succeeds only if no marker appeared (no injected command or carried code ran) and every
entry of the sandbox outside the run's own folders kept its type, mode, bytes and link target,
with nothing added there (nothing was written, deleted or replaced outside the run)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

MARKER = "PWNED"  # a regular file of exactly this name means hostile code ran

# the standard decoys: a user's files around the run's folders (relative to the sandbox)
DECOY_FILES = {
    "decoy/notes.txt": (b"private notes\n", 0o600),
    "decoy/victim.txt": (b"victim: must keep mode 0600 and these bytes\n", 0o600),
    "decoy/run.sh": (b"#!/bin/sh\necho user script\n", 0o755),
    "decoy/sub/data.csv": (b"a,b\n1,2\n", 0o644),
    "fresh": (b"a file named like the part of 'fresh run' before its space\n", 0o644),
    "wd/user.txt": (b"a user's file in 'wd', the part of 'wd mv' before its space\n", 0o644),
    "r": (b"a file named like the part of 'r data' before its space\n", 0o644),
    "z": (b"a file named like the part of 'z || ...' before its space\n", 0o644),
    "home/.bashrc": (b"# the sandbox's home\n", 0o644),
}
DECOY_LINKS = {"decoy/link": "notes.txt"}


@dataclass(frozen=True)
class Entry:
    """What a path is: its type, permission bits and content (sha256, or a link's target)."""

    kind: str
    mode: int
    content: str


@dataclass
class Sandbox:
    """A probe's folder; ``allowed`` are the run's own folders (changes there are the run's)."""

    root: Path
    allowed: list[Path] = field(default_factory=list)

    @property
    def marker(self) -> Path:
        return self.root / MARKER

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def rawcopy(self) -> Path:
        """A user's raw dataset copy (images and labels) beside the run: never to change."""
        return self.root / "rawcopy"

    def allow(self, *paths: Path) -> None:
        self.allowed.extend(Path(p) for p in paths)


def make_sandbox(root: Path, raw_dataset: Path) -> Sandbox:
    """A fresh ``root`` with the decoy tree and a copy of ``raw_dataset`` under rawcopy/."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for name, (data, mode) in DECOY_FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    for name, target in DECOY_LINKS.items():
        (root / name).symlink_to(target)
    shutil.copytree(raw_dataset, root / "rawcopy" / raw_dataset.name)
    return Sandbox(root)


def _entry(path: Path) -> Entry:
    status = path.lstat()
    mode = stat.S_IMODE(status.st_mode)
    if stat.S_ISLNK(status.st_mode):
        return Entry("link", mode, os.readlink(path))
    if stat.S_ISDIR(status.st_mode):
        return Entry("dir", mode, "")
    if stat.S_ISREG(status.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return Entry("file", mode, digest.hexdigest())
    return Entry("other", mode, "")


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry below ``root`` (links not followed) by its path relative to ``root``."""
    entries: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            entries[str(path.relative_to(root))] = _entry(path)
    return entries


def _inside(relative: str, allowed: list[str]) -> bool:
    return any(relative == a or relative.startswith(a + os.sep) for a in allowed)


def decoy_changes(
    root: Path, before: dict[str, Entry], after: dict[str, Entry], allowed: list[Path]
) -> list[str]:
    """What changed outside the run's folders: changed, removed and added entries, one line each
    (a folder of the run's may itself be created: only what is below it is the run's)."""
    names = []
    for path in allowed:
        try:
            names.append(str(Path(path).relative_to(root)))
        except ValueError:
            continue
    problems = []
    for relative, entry in sorted(before.items()):
        if _inside(relative, names):
            continue
        now = after.get(relative)
        if now is None:
            problems.append(f"removed: {relative!r}")
        elif now != entry:
            what = [k for k in ("kind", "mode", "content") if getattr(now, k) != getattr(entry, k)]
            problems.append(f"changed ({', '.join(what)}): {relative!r}")
    for relative in sorted(set(after) - set(before)):
        parent_of_run = after[relative].kind == "dir" and any(
            a.startswith(relative + os.sep) for a in names
        )  # a folder made on the way to the run's folder
        if not (_inside(relative, names) or parent_of_run or relative == MARKER):
            problems.append(f"added: {relative!r}")
    return problems


def markers_found(*roots: Path) -> list[Path]:
    """Regular files named exactly MARKER anywhere below ``roots`` (links not followed)."""
    found = []
    for root in roots:
        if not root.is_dir():
            continue
        for folder, _dirs, files in os.walk(root):
            if MARKER in files and (Path(folder) / MARKER).is_file():
                found.append(Path(folder) / MARKER)
    return sorted(set(found))


def markers_in(*folders: Path) -> list[Path]:
    """MARKER files directly in ``folders`` (the repository, the base: too big to walk)."""
    return sorted({f / MARKER for f in folders if (f / MARKER).is_file()})
