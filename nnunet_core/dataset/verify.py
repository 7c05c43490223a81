"""Integrity check of a raw dataset before anything else runs on it.

Upstream's ``verify_dataset_integrity`` stops at the first failed assert; here every problem of
every case is collected (cases are checked in parallel) so one run lists all that needs fixing.
Problems in ``dataset.json`` itself and an empty dataset stop at once: nothing else can be checked.
Test cases (``imagesTs``, with ``labelsTs`` where present) get the same per-case checks, so a
broken test image stops the workflow before training instead of after it. The report records a
manifest of the training files (``stale_reason``), so that fingerprint, plan and preprocess can
tell whether it still vouches for the data.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core import __version__
from nnunet_core.dataset.discovery import RawCase, test_cases, training_cases
from nnunet_core.dataset.file_endings import ending_mismatch
from nnunet_core.dataset.verify_case import (
    ATOL,
    RTOL,
    CaseCheck,
    check_case,
    check_test_case,
    display_path,
)
from nnunet_core.errors import DatasetError
from nnunet_core.io.dataset_json import DatasetJson, LabelSpec, load_dataset_json
from nnunet_core.io.readers import reader_for_dataset, reader_name
from nnunet_core.layout.raw import (
    DATASET_JSON,
    IMAGES_TS,
    TEST_FOLDERS,
    TRAINING_FOLDERS,
    channel_file_name,
    channel_file_pattern,
    images_tr_dir,
)
from nnunet_core.runtime.parallel import map_cases


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
    raw_dir: Path,
    dataset_json: DatasetJson,
    cases: list[RawCase],
    spacing_files: bool = False,
    test: list[RawCase] | None = None,
) -> list[str]:
    """Files in imagesTr/labelsTr (and imagesTs/labelsTs, with ``test``) with a wrong ending, a
    wrong name, or no matching case.

    Hidden files (``.DS_Store``) are skipped, and with ``spacing_files`` (Tiff3DIO) a case's
    ``CASE.json``; with upstream's explicit ``dataset`` key the listed files' endings are checked
    instead of imagesTr/labelsTr.
    """
    ending = dataset_json.file_ending
    problems: list[str] = []
    folders = [(*TEST_FOLDERS, test)] if test is not None else []
    if "dataset" in dataset_json.raw:
        listed = [p for case in cases for p in (*case.images, case.label) if p is not None]
        problems += [
            f"{display_path(p, raw_dir)}: file does not end with the dataset's file_ending "
            f"{ending!r}"
            for p in listed
            if not p.name.endswith(ending)
        ]
    else:
        folders.insert(0, (*TRAINING_FOLDERS, cases))
    channel_re = channel_file_pattern(ending)
    for images, labels, folder_cases in folders:
        identifiers = {case.identifier for case in folder_cases or []}
        for folder in (images, labels):
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
                elif folder == images:
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
                    problems.append(f"{name}: label without images in {images}")
    return problems


def _dimension_problems(
    checks: dict[str, CaseCheck],
    first_files: dict[str, str],
    test_checks: dict[str, CaseCheck] | None = None,
) -> None:
    """Mark the minority of training cases when 2-D and 3-D cases are mixed, and every test case
    whose dimensionality differs from the training cases' (``first_files``: task key -> the
    case's channel-0 file as shown)."""
    dims = {cid: c.ndim for cid, c in checks.items() if c.ndim is not None}
    counts = {d: sum(1 for v in dims.values() if v == d) for d in set(dims.values())}
    if not counts:
        return
    majority = max(counts, key=lambda d: (counts[d], d))
    for cid, ndim in dims.items():
        if ndim != majority:
            checks[cid].problem(
                f"{first_files[cid]}: {ndim}-D image but {counts[majority]} other case(s) are "
                f"{majority}-D (2-D and 3-D cases mixed)"
            )
    for cid, check in (test_checks or {}).items():
        if check.ndim is not None and check.ndim != majority:
            check.problem(
                f"{first_files[cid]}: {check.ndim}-D image but the {counts[majority]} training "
                f"case(s) are {majority}-D"
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


def training_files_manifest(raw_dir: Path, dataset_json: DatasetJson) -> dict[str, Any]:
    """Count and SHA-256 of (name, size, mtime) of ``dataset.json`` and every file of imagesTr
    and labelsTr (or of the files the explicit ``dataset`` key lists): what fingerprint, plan and
    preprocess read. Test files are left out on purpose: a new test image must not make the
    training data look unverified (``predict`` checks its own inputs)."""
    paths = [raw_dir / DATASET_JSON]
    if "dataset" in dataset_json.raw:
        cases = training_cases(raw_dir, dataset_json)
        paths += [p for case in cases for p in (*case.images, case.label) if p is not None]
    for folder in TRAINING_FOLDERS:
        if (raw_dir / folder).is_dir():
            paths += sorted((raw_dir / folder).iterdir())
    digest = hashlib.sha256()
    for path in paths:
        try:
            stat = os.stat(path)
            entry = f"{display_path(path, raw_dir)}\t{stat.st_size}\t{stat.st_mtime_ns}\n"
        except OSError:
            entry = f"{display_path(path, raw_dir)}\tmissing\n"
        digest.update(entry.encode("utf-8", "surrogateescape"))
    return {"files": len(paths), "sha256": digest.hexdigest()}


def stale_reason(report: dict[str, Any], raw_dir: Path) -> str | None:
    """Why a ``verify.json`` report does not vouch for ``raw_dir`` as it is now (None: it does).

    Current means: written by this version for this folder, and no training file or
    ``dataset.json`` added, removed, resized or modified (mtime) since.
    """
    if not isinstance(report, dict):
        return "not a verify report"
    if report.get("nnunet_core_version") != __version__:
        return f"written by nnunet-core {report.get('nnunet_core_version')}, this is {__version__}"
    if Path(str(report.get("raw_dir"))).resolve() != raw_dir.resolve():
        return f"it checked {report.get('raw_dir')}, not {raw_dir}"
    try:
        dataset_json = load_dataset_json(raw_dir / DATASET_JSON)
    except DatasetError:
        return "dataset.json cannot be read"
    if report.get("training_files") != training_files_manifest(raw_dir, dataset_json):
        return "the training files or dataset.json changed since"
    return None


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
        # a file_ending typo finds no case: name the key and the endings the files have
        msg = ending_mismatch(json_path, dataset_json.file_ending, images_tr_dir(raw_dir)) or (
            f"{images_tr_dir(raw_dir)}: no training cases found (empty dataset; expected files "
            f"like {channel_file_name('CASE', 0, dataset_json.file_ending)})"
        )
        raise DatasetError(msg)
    # before reading: a file changed during the check leaves the report stale
    manifest = training_files_manifest(raw_dir, dataset_json)
    test = test_cases(raw_dir, dataset_json)
    example = next((p for c in cases for p in c.images if p.is_file()), None)
    reader = reader_for_dataset(dataset_json.raw, str(json_path), example)
    result = VerifyResult(num_cases=len(cases) + len(test))
    result.problems += file_problems(raw_dir, dataset_json, cases, reader.name == "Tiff3DIO", test)
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
    tasks = [(case.identifier, (check_case, case, *args)) for case in cases]
    test_keys = [f"{IMAGES_TS}/{case.identifier}" for case in test]
    test_tasks = [
        (key, (check_test_case, case, *args)) for key, case in zip(test_keys, test, strict=True)
    ]
    # one pool for training and test cases: they are checked in parallel together
    checked = map_cases(_check_any, tasks + test_tasks, num_processes, "verify", disable_progress)
    checks = {key: checked[key] for key, _ in tasks}
    test_checks = {key: checked[key] for key in test_keys}
    first_files = {
        key: display_path(case.images[0], raw_dir) if case.images else case.identifier
        for key, case in [*((c.identifier, c) for c in cases), *zip(test_keys, test, strict=True)]
    }
    _dimension_problems(checks, first_files, test_checks)
    for check in checked.values():
        result.problems += check.problems
        result.warnings += check.warnings
    result.broken_cases = sum(1 for c in checked.values() if c.problems)
    result.report = _report(dataset, raw_dir, dataset_json, checks, result.warnings, reader.name)
    result.report["test_cases_checked"] = len(test)
    result.report["test_labels_checked"] = sum(1 for case in test if case.label is not None)
    result.report["training_files"] = manifest
    return result


def _check_any(check: Callable[..., CaseCheck], *args: Any) -> CaseCheck:
    """``check(*args)``: training and test cases share one pool of workers."""
    return check(*args)
