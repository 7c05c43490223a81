"""What a dataset.json ``file_ending`` typo looks like: the endings the image files really have.

With a ``file_ending`` that no image file has (``.nii`` for ``.nii.gz`` files, ``nii.gz`` without
the dot) no case is found at all, and "no training cases" does not say why. Channel files are
named ``CASE_XXXX<ending>``, so what follows the 4-digit channel number is the ending the
files have, whatever the format (also one this package cannot read).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

# CASE_XXXX<ending>: group 1 the ending (a dot and what follows the channel number)
_CHANNEL_FILE = re.compile(r"^.+_\d{4}(\..+)$")
_COMPRESSIONS = (".gz", ".bz2", ".xz")


def file_ending_of(name: str) -> str:
    """The ending of one file name: after ``_XXXX`` where it has one, else its last suffix (two
    for a compressed file, ``.nii.gz``); '' for a name without a dot."""
    match = _CHANNEL_FILE.match(name)
    if match is not None:
        return match.group(1)
    suffixes = Path(name).suffixes
    if len(suffixes) >= 2 and suffixes[-1] in _COMPRESSIONS:
        return "".join(suffixes[-2:])
    return suffixes[-1] if suffixes else ""


def endings_found(folder: Path) -> Counter[str]:
    """How many files of ``folder`` have each ending (hidden files left out; none: empty)."""
    if not folder.is_dir():
        return Counter()
    return Counter(
        file_ending_of(p.name) for p in folder.iterdir() if p.is_file() and p.name[:1] != "."
    )


def ending_mismatch(json_path: Path, file_ending: str, folder: Path) -> str | None:
    """One line naming the ``file_ending`` of ``json_path`` (a dataset.json) and the endings
    ``folder`` holds instead, e.g. ``/raw/Dataset004_X/dataset.json file_ending is ".nii" but
    imagesTr holds ".nii.gz" files (12)...``; None when ``folder`` has files with
    ``file_ending`` or no files at all."""
    found = endings_found(folder)
    if not found or file_ending in found:
        return None
    listed = ", ".join(
        f'"{ending}" files ({count})' if ending else f"files without an ending ({count})"
        for ending, count in found.most_common()
    )
    return (
        f'{json_path} file_ending is "{file_ending}" but {folder.name} holds {listed}: '
        "set file_ending to the images' ending"
    )
