"""Integrity check of a raw dataset before anything else runs on it.

Upstream's ``verify_dataset_integrity`` stops at the first failed assert; here every problem of
every case is collected (cases are checked in parallel) so one run lists all that needs fixing.
Problems in ``dataset.json`` itself and an empty dataset stop at once: nothing else can be checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core import __version__
from nnunet_core.dataset.discovery import RawCase, test_cases, training_cases
from nnunet_core.dataset.verify_case import ATOL, RTOL, CaseCheck, check_case, display_path
from nnunet_core.errors import DatasetError
from nnunet_core.io.dataset_json import DatasetJson, LabelSpec, load_dataset_json
from nnunet_core.io.readers import reader_for_dataset, reader_name
from nnunet_core.parallel import map_cases
from nnunet_core.paths import DATASET_JSON


@dataclass
class VerifyResult:
    """All problems (empty when the dataset is fine), warnings and the JSON report."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    num_cases: int = 0
    broken_cases: int = 0

    def summary(self, dataset: str) -> str:
        """Final line after several problems."""
        count = len(self.problems)
        return (
            f"{count} problem(s) in {dataset}: {self.broken_cases} of {self.num_cases} case(s) "
            "broken (see the lines above); nothing was written"
        )


def check_declared_labels(spec: LabelSpec, source: str) -> None:
    """Declared labels (region members included, ignore excluded) must be 0, 1, ..., N."""
    values = sorted(set(spec.all_labels) - {spec.ignore_label})
    expected = list(range(len(values)))
    if values != expected:
        missing = sorted(set(range(max(values) + 1)) - set(values))
        msg = f"{source}: declared labels must be consecutive 0..N, got {values}" + (
            f" (missing {missing})" if missing else ""
        )
        raise DatasetError(msg)


def allowed_label_values(spec: LabelSpec) -> tuple[int, ...]:
    """Values a label map may hold: every declared label (union of regions) plus the ignore
    label."""
    values = set(spec.all_labels)
    if spec.ignore_label is not None:
        values.add(spec.ignore_label)
    return tuple(sorted(values))


def file_problems(
    raw_dir: Path, dataset_json: DatasetJson, cases: list[RawCase], spacing_files: bool = False
) -> list[str]:
    """Files in imagesTr/labelsTr with a wrong ending, a wrong name, or no matching case.

    Hidden files (``.DS_Store``) are skipped, and with ``spacing_files`` (Tiff3DIO) a case's
    ``CASE.json``; with upstream's explicit ``dataset`` key the listed files' endings are checked
    instead.
    """
    ending = dataset_json.file_ending
    if "dataset" in dataset_json.raw:
        listed = [p for case in cases for p in (*case.images, case.label) if p is not None]
        return [
            f"{display_path(p, raw_dir)}: file does not end with the dataset's file_ending "
            f"{ending!r}"
            for p in listed
            if not p.name.endswith(ending)
        ]
    problems: list[str] = []
    channel_re = re.compile(r"^(.+)_(\d{4})" + re.escape(ending) + "$")
    identifiers = {case.identifier for case in cases}
    for folder in ("imagesTr", "labelsTr"):
        directory = raw_dir / folder
        if not directory.is_dir():
            continue
        for path in sorted(directory.iterdir()):
            name = f"{folder}/{path.name}"
            if path.name.startswith("."):
                continue
            if spacing_files and path.name.endswith(".json") and path.stem in identifiers:
                continue
            if not path.name.endswith(ending):
                problems.append(
                    f"{name}: file does not end with the dataset's file_ending {ending!r}"
                )
            elif folder == "imagesTr":
                match = channel_re.match(path.name)
                if match is None:
                    problems.append(
                        f"{name}: name does not follow CASE_XXXX{ending} (XXXX = channel)"
                    )
                elif int(match.group(2)) >= dataset_json.num_channels:
                    problems.append(
                        f"{name}: channel {int(match.group(2))} but dataset.json declares "
                        f"{dataset_json.num_channels} channel(s)"
                    )
            elif path.name[: -len(ending)] not in identifiers:
                problems.append(f"{name}: label without images in imagesTr")
    return problems


def _dimension_problems(checks: dict[str, CaseCheck]) -> None:
    """Mark the minority of cases when 2-D and 3-D cases are mixed."""
    dims = {cid: c.ndim for cid, c in checks.items() if c.ndim is not None}
    counts = {d: sum(1 for v in dims.values() if v == d) for d in set(dims.values())}
    if len(counts) < 2:
        return
    majority = max(counts, key=lambda d: (counts[d], d))
    for cid, ndim in dims.items():
        if ndim != majority:
            checks[cid].problem(
                f"{ndim}-D image but {counts[majority]} other case(s) are {majority}-D "
                "(2-D and 3-D cases mixed)"
            )


def _stats(values: list[tuple[float, ...]], integer: bool = False) -> dict[str, list[float]]:
    """Per-axis min/median/max (empty if cases differ in dimensionality)."""
    if len({len(v) for v in values}) != 1:
        return {}
    array = np.asarray(values, dtype=float)
    cast = int if integer else float
    return {
        "min": [cast(v) for v in array.min(axis=0)],
        "median": np.median(array, axis=0).tolist(),
        "max": [cast(v) for v in array.max(axis=0)],
    }


def _report(
    dataset: str,
    raw_dir: Path,
    dataset_json: DatasetJson,
    checks: dict[str, CaseCheck],
    warnings: list[str],
    reader: str,
) -> dict[str, Any]:
    spec = dataset_json.label_spec
    voxels: dict[int, int] = {}
    for check in checks.values():
        for value, count in check.voxels_per_label.items():
            voxels[value] = voxels.get(value, 0) + count
    dims = sorted({c.ndim for c in checks.values() if c.ndim is not None})
    return {
        "dataset": dataset,
        "raw_dir": str(raw_dir),
        "nnunet_core_version": __version__,
        "cases_checked": len(checks),
        "case_identifiers": list(checks),
        "num_test_cases": len(test_cases(raw_dir, dataset_json)),
        "file_ending": dataset_json.file_ending,
        "image_reader_writer": reader,
        "channels": dataset_json.channel_names,
        "dimensionality": dims[0] if dims else None,
        "labels": dataset_json.raw["labels"],
        "has_regions": spec.has_regions,
        "ignore_label": spec.ignore_label,
        "labels_found": sorted(voxels),
        "voxels_per_label": {str(k): voxels[k] for k in sorted(voxels)},
        "cases_without_foreground": [cid for cid, c in checks.items() if c.has_foreground is False],
        "warnings": warnings,
        "spacing": _stats([c.spacing for c in checks.values() if c.spacing]),
        "shape": _stats([c.shape for c in checks.values() if c.shape], integer=True),
        "geometry_tolerance": {"rtol": RTOL, "atol": ATOL},
    }


def verify_dataset(
    raw_dir: Path,
    dataset: str,
    num_processes: int = 1,
    disable_progress: bool | None = None,
) -> VerifyResult:
    """Check ``raw_dir``; ``dataset.json`` errors and an empty dataset raise DatasetError."""
    if not raw_dir.is_dir():
        msg = f"{raw_dir}: raw dataset folder not found"
        raise DatasetError(msg)
    json_path = raw_dir / DATASET_JSON
    dataset_json = load_dataset_json(json_path)
    check_declared_labels(dataset_json.label_spec, str(json_path))
    cases = training_cases(raw_dir, dataset_json)
    if not cases:
        msg = (
            f"{raw_dir / 'imagesTr'}: no training cases found (empty dataset; expected files like "
            f"CASE_0000{dataset_json.file_ending})"
        )
        raise DatasetError(msg)
    example = next((p for c in cases for p in c.images if p.is_file()), None)
    reader = reader_for_dataset(dataset_json.raw, str(json_path), example)
    result = VerifyResult(num_cases=len(cases))
    result.problems += file_problems(raw_dir, dataset_json, cases, reader.name == "Tiff3DIO")
    if dataset_json.num_training != len(cases):
        result.problems.append(
            f"{json_path.name}: numTraining is {dataset_json.num_training} but "
            f"{len(cases)} training case(s) were found"
        )
    spec = dataset_json.label_spec
    args = (raw_dir, allowed_label_values(spec), spec.ignore_label, reader.name)
    planned = reader_name(dataset_json.raw, str(json_path))
    if planned != reader.name:
        # the planner sees no file: without the key it would name another reader in the plans
        result.warnings.append(
            f"{json_path.name}: {example.name if example else 'the images'} needs {reader.name}, "
            f"but file_ending {dataset_json.file_ending!r} alone selects {planned}; add "
            f'"overwrite_image_reader_writer": "{reader.name}"'
        )
    tasks = [(case.identifier, (case, *args)) for case in cases]
    checks = map_cases(check_case, tasks, num_processes, "verify", disable_progress)
    _dimension_problems(checks)
    for check in checks.values():
        result.problems += check.problems
        result.warnings += check.warnings
    result.broken_cases = sum(1 for c in checks.values() if c.problems)
    result.report = _report(dataset, raw_dir, dataset_json, checks, result.warnings, reader.name)
    return result
