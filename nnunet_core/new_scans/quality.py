"""What a reader checks first in a folder of predicted scans: each case's volume per label, flags
for the cases that look wrong (nothing found, a volume the training labels never had), and the
two tables ``summary.tsv`` and ``failed.tsv`` built from the per-case records.

A record is the JSON a shard job writes per case (``case_record_path``): ``case``, ``key`` (the
model and settings it was predicted with), ``shape``, ``spacing``, ``seconds``, ``volumes_ml``,
``flags`` and ``segmentation``; a failure record (``failure_record_path``) has ``case``, ``key``
and ``reason``. Records with another key belong to an earlier model or setting and are ignored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.io.atomic import write_text
from nnunet_core.io.dataset_json import IGNORE_KEY, LabelSpec
from nnunet_core.layout.new_scans import (
    CASE_RECORDS,
    FAILED_TSV,
    FAILURE_RECORDS,
    RECORDS_FOLDER,
    SUMMARY_TSV,
)

EMPTY_FLAG = "empty"
BELOW_SUFFIX = "_below_training"
ABOVE_SUFFIX = "_above_training"
VOLUME_SUFFIX = "_ml"
# The readers' stand-in spacing of the missing axis of a 2-D image: 999 times the largest other.
PLACEHOLDER_FACTOR = 999.0


def foreground_classes(label_spec: LabelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """(name, label values) of every foreground label or region, in ``dataset.json`` order
    (background and the ignore label left out)."""
    return [
        (name, value)
        for name, value in label_spec.labels.items()
        if name != IGNORE_KEY and value != (0,)
    ]


def voxel_ml(spacing: Sequence[float], shape: Sequence[int] | None = None) -> float:
    """One voxel's volume in ml (mm^3 / 1000), the product of the spacing, so its axis order
    does not matter.

    The readers give a 2-D image a first spacing of 999 times the largest other (upstream's
    convention); that axis is no thickness, so it is left out when the image has one slice along
    it (``shape``, when given) and a 2-D image's "volume" is its area in mm^2 / 1000.
    """
    values = [abs(float(s)) for s in spacing]
    if len(values) == 3 and (shape is None or int(shape[0]) == 1):
        if math.isclose(values[0], PLACEHOLDER_FACTOR * max(values[1:]), rel_tol=1e-6):
            values = values[1:]
    return math.prod(values) / 1000.0


def _spatial(segmentation: np.ndarray, spacing: Sequence[float]) -> np.ndarray:
    """The segmentation without a leading channel axis of one (the readers' ``(1, z, y, x)``)."""
    seg = np.asarray(segmentation)
    if seg.ndim == len(spacing) + 1 and seg.shape[0] == 1:
        seg = seg[0]
    if seg.ndim != len(spacing):
        msg = f"a segmentation of shape {seg.shape} with {len(spacing)} spacing values"
        raise ValueError(msg)
    return seg


def case_figures(
    segmentation: np.ndarray, spacing: Sequence[float], label_spec: LabelSpec
) -> dict[str, Any]:
    """A predicted case's ``shape``, ``spacing`` and ``volumes_ml`` (label name -> ml).

    A label's volume counts the voxels of its value. A region's counts the voxels whose value is
    one of the region's labels: the region-based export paints the regions in
    ``regions_class_order``, so a voxel in nested regions carries the innermost region's value,
    and that value is a label of every region around it. This is the mask upstream's evaluation
    uses (``np.isin``), so a volume compares with the training labels' ``n_ref``.
    """
    seg = _spatial(segmentation, spacing)
    unit = voxel_ml(spacing, seg.shape)
    volumes = {}
    for name, values in foreground_classes(label_spec):
        if label_spec.has_regions:
            count = sum(int(np.count_nonzero(seg == v)) for v in set(values))
        else:
            count = int(np.count_nonzero(seg == values[0]))
        volumes[name] = count * unit
    return {
        "shape": [int(n) for n in seg.shape],
        "spacing": [float(s) for s in spacing],
        "volumes_ml": volumes,
    }


def flags(
    volumes_ml: Mapping[str, float], ranges: Mapping[str, tuple[float, float]] | None
) -> list[str]:
    """``empty`` when no label has a voxel; ``<label>_below_training`` / ``_above_training`` when
    a volume lies outside the range the training labels had (``ranges`` None: not known)."""
    found = [EMPTY_FLAG] if all(v == 0 for v in volumes_ml.values()) else []
    for name, volume in volumes_ml.items():
        if ranges is None or name not in ranges:
            continue
        low, high = ranges[name]
        if volume < low:
            found.append(f"{name}{BELOW_SUFFIX}")
        elif volume > high:
            found.append(f"{name}{ABOVE_SUFFIX}")
    return found


def _cell(value: Any) -> str:
    """One TSV cell: no tab or line break may split a row."""
    return " ".join(str(value).split())


def _tsv(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["\t".join(header), *("\t".join(_cell(v) for v in row) for row in rows)]
    return "\n".join(lines) + "\n"


def _number(value: Any, digits: int) -> str:
    """A rounded number without trailing zeros; a missing or non-numeric value is empty."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    if not math.isfinite(value):
        return str(value)
    return f"{float(value):.{digits}f}".rstrip("0").rstrip(".") or "0"


def _joined(values: Any, digits: int | None = None) -> str:
    """``[64, 128, 128]`` -> ``64x128x128`` (spacing rounded to ``digits``)."""
    if not isinstance(values, list | tuple):
        return ""
    return "x".join(str(v) if digits is None else _number(v, digits) for v in values)


def _label_names(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every label of the records, in the order the first record that has it lists it."""
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record.get("volumes_ml") or {}))
    return list(names)


def write_summary(output: Path, records: Sequence[Mapping[str, Any]]) -> Path:
    """``output/summary.tsv``: one row per case (sorted by case), written atomically.

    Columns: case, shape (``64x128x128``), spacing (mm, ``3x0.78x0.78``), seconds, one
    ``<label>_ml`` per label, flags (comma-separated, empty when none). Volumes are rounded to
    3 decimals, seconds to 2.
    """
    labels = _label_names(records)
    header = ["case", "shape", "spacing", "seconds", *(f"{n}{VOLUME_SUFFIX}" for n in labels)]
    rows = []
    for record in sorted(records, key=lambda r: str(r.get("case"))):
        volumes = record.get("volumes_ml") or {}
        rows.append(
            [
                record.get("case", ""),
                _joined(record.get("shape")),
                _joined(record.get("spacing"), 4),
                _number(record.get("seconds"), 2),
                *(_number(volumes.get(n), 3) for n in labels),
                ",".join(record.get("flags") or ()),
            ]
        )
    path = Path(output) / SUMMARY_TSV
    write_text(path, _tsv([*header, "flags"], rows))
    return path


def write_failed(output: Path, failures: Sequence[Mapping[str, Any]]) -> Path | None:
    """``output/failed.tsv`` (case, reason; sorted by case), or None and no file when no case
    failed: a table left from an earlier run would name cases that have since succeeded."""
    path = Path(output) / FAILED_TSV
    if not failures:
        path.unlink(missing_ok=True)
        return None
    rows = [
        (f.get("case", ""), f.get("reason", ""))
        for f in sorted(failures, key=lambda f: str(f.get("case")))
    ]
    write_text(path, _tsv(["case", "reason"], rows))
    return path


def _records_in(folder: Path, key: str) -> list[dict[str, Any]]:
    """The records in ``folder`` with this key, sorted by case; a file that is not a readable
    JSON object with ``case`` and ``key`` (a half-copied folder, a user's edit) is skipped."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(record, dict) and record.get("key") == key and "case" in record:
            found.append(record)
    return sorted(found, key=lambda r: str(r["case"]))


def read_records(output: Path, key: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The case records and the failure records under ``output`` that carry ``key``."""
    records = Path(output) / RECORDS_FOLDER
    return _records_in(records / CASE_RECORDS, key), _records_in(records / FAILURE_RECORDS, key)
