"""Finding the cases of a raw dataset and their files (upstream's naming rules)."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.io.dataset_json import DatasetJson
from nnunet_core.io.readers import reader_name
from nnunet_core.layout.raw import (
    IMAGES_TS,
    channel_file_name,
    channel_file_pattern,
    images_tr_dir,
    labels_tr_dir,
    labels_ts_dir,
)

NATURAL_READER = "NaturalImage2DIO"


@dataclass(frozen=True)
class RawCase:
    """One case: its channel files in channel order and its label file (None for test cases)."""

    identifier: str
    images: tuple[Path, ...]
    label: Path | None


def not_a_file(path: Path) -> str | None:
    """Why an existing entry at ``path`` is no readable file ("is a dangling symbolic link -> T",
    "is a symbolic link loop", "is a folder"); None when nothing is there (plainly missing) or
    it is a file."""
    if path.is_symlink():
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a symbolic link loop"
            return f"is a dangling symbolic link -> {os.readlink(path)}"
    if path.is_dir():
        return "is a folder, not a file"
    return None


def case_identifiers(folder: Path, file_ending: str) -> list[str]:
    """Sorted unique case ids in ``folder``: file names minus ``_XXXX`` and the ending."""
    if not folder.is_dir():
        return []
    pattern = channel_file_pattern(file_ending)
    found = {m.group(1) for p in folder.iterdir() if (m := pattern.match(p.name))}
    return sorted(found)


def channel_files(
    folder: Path, identifier: str, file_ending: str, num_channels: int
) -> tuple[Path, ...]:
    """The expected channel files of a case (they may not exist; verify checks that)."""
    return tuple(
        folder / channel_file_name(identifier, c, file_ending) for c in range(num_channels)
    )


def several_channels_per_file(dataset_json: DatasetJson) -> bool:
    """Whether one file may hold several of the declared channels (RGB natural images)."""
    return dataset_json.num_channels > 1 and reader_name(dataset_json.raw) == NATURAL_READER


def case_channel_files(
    folder: Path, identifier: str, dataset_json: DatasetJson
) -> tuple[Path, ...]:
    """The channel files of a case: ``_0000`` .. ``_{n-1}``, except for natural 2-D images.

    An RGB(A) png/bmp/tif holds 3 (4) of the declared channels in one file (upstream's
    NaturalImage2DIO), so there the case's ``_XXXX`` files on disk are its files.
    """
    ending, count = dataset_json.file_ending, dataset_json.num_channels
    if several_channels_per_file(dataset_json):
        pattern = re.compile(re.escape(identifier) + r"_\d{4}" + re.escape(ending) + "$")
        found = sorted(p for p in folder.iterdir() if pattern.match(p.name))
        if found:
            return tuple(found)
    return channel_files(folder, identifier, ending, count)


def _explicit_cases(raw_dir: Path, dataset_json: DatasetJson) -> list[RawCase]:
    """Upstream's undocumented ``dataset`` key: explicit per-case file lists."""
    cases = []
    for identifier, entry in sorted(dataset_json.raw["dataset"].items()):
        images = tuple(_resolve(raw_dir, p) for p in entry["images"])
        label = _resolve(raw_dir, entry["label"]) if entry.get("label") else None
        cases.append(RawCase(identifier, images, label))
    return cases


def _resolve(raw_dir: Path, path: str) -> Path:
    import os

    candidate = Path(os.path.expandvars(path))
    return candidate if candidate.is_absolute() else raw_dir / candidate


def training_cases(raw_dir: Path, dataset_json: DatasetJson) -> list[RawCase]:
    """Cases of ``imagesTr`` with their labels from ``labelsTr``, sorted by id."""
    if "dataset" in dataset_json.raw:
        return _explicit_cases(raw_dir, dataset_json)
    ending = dataset_json.file_ending
    images_dir, labels_dir = images_tr_dir(raw_dir), labels_tr_dir(raw_dir)
    identifiers = case_identifiers(images_dir, ending)
    return [
        RawCase(
            identifier=i,
            images=case_channel_files(images_dir, i, dataset_json),
            label=labels_dir / f"{i}{ending}",
        )
        for i in identifiers
    ]


def test_cases(raw_dir: Path, dataset_json: DatasetJson, folder: str = IMAGES_TS) -> list[RawCase]:
    """Cases of ``imagesTs`` (labels, if any, live in ``labelsTs``)."""
    ending = dataset_json.file_ending
    images_dir, labels_dir = raw_dir / folder, labels_ts_dir(raw_dir)
    cases = []
    for i in case_identifiers(images_dir, ending):
        label = labels_dir / f"{i}{ending}"
        cases.append(
            RawCase(
                identifier=i,
                images=case_channel_files(images_dir, i, dataset_json),
                label=label if label.is_file() else None,
            )
        )
    return cases
