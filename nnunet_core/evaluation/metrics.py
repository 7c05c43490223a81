"""Dice/IoU of predicted segmentations against references, and upstream's ``summary.json``.

Per case and per label (or region, a union of labels): TP/FP/FN/TN over the voxels whose
reference is not the ignore label; Dice = 2TP/(2TP+FP+FN), IoU = TP/(TP+FP+FN), both NaN when
TP+FP+FN == 0 (the class is absent from both). The summary holds ``metric_per_case``, ``mean``
(nanmean over cases per label) and ``foreground_mean`` (plain mean over labels of those means, as
upstream: one label that is NaN in every case makes it NaN). Keys are ``str(label)`` for labels
and ``str(tuple)`` for regions, e.g. ``"(1, 2)"``; ``save_summary_json`` sorts keys as upstream.
With ``surface`` settings, each label also gets HD95 and NSD in mm (``evaluation.surface``; off
by default, as upstream, whose readers only need Dice).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.dataset.verify_case import geometry_problems, read_checked_label
from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.surface import (
    SURFACE_METRIC_NAMES,
    SurfaceSettings,
    check_tolerance_labels,
    load_surface_metric_libraries,
    surface_metrics,
)
from nnunet_core.io.atomic import write_json
from nnunet_core.io.dataset_json import IGNORE_KEY, DatasetJson, LabelSpec
from nnunet_core.io.images import readers_for_file
from nnunet_core.io.readers import FileImage
from nnunet_core.runtime.parallel import map_cases

LabelOrRegion = int | tuple[int, ...]
METRIC_NAMES = ("Dice", "IoU", "FP", "TP", "FN", "TN", "n_pred", "n_ref")


def labels_or_regions(label_spec: LabelSpec) -> list[LabelOrRegion]:
    """What to evaluate: the foreground regions, or the foreground labels."""
    if label_spec.has_regions:
        return list(label_spec.foreground_regions)
    return list(label_spec.foreground_labels)


def classes_from_dataset_json(dataset_json: DatasetJson) -> list[LabelOrRegion]:
    """Like ``labels_or_regions`` but with upstream's key types for regions.

    In ``dataset.json`` a region written as a scalar (``"enhancing": 3``) stays the int 3 (key
    ``"3"``) and a list becomes a tuple (``[3]`` -> ``"(3,)"``); ``LabelSpec`` keeps only tuples.
    """
    spec = dataset_json.label_spec
    if not spec.has_regions:
        return list(spec.foreground_labels)
    classes: list[LabelOrRegion] = []
    for name, value in dataset_json.raw["labels"].items():
        if name in ("background", IGNORE_KEY):
            continue
        classes.append(
            tuple(int(v) for v in value) if isinstance(value, list | tuple) else int(value)
        )
    return classes


def label_key(label_or_region: LabelOrRegion | str) -> str:
    """JSON key of a label (``"1"``) or region (``"(1, 2)"``), as upstream writes them."""
    if isinstance(label_or_region, str):  # already a key (a summary read back from JSON)
        return label_or_region
    if isinstance(label_or_region, tuple):
        return str(tuple(int(v) for v in label_or_region))
    return str(int(label_or_region))


def region_mask(segmentation: np.ndarray, label_or_region: LabelOrRegion) -> np.ndarray:
    """Boolean mask of one label or of the union of a region's labels."""
    if isinstance(label_or_region, tuple):
        return np.isin(segmentation, np.asarray(label_or_region))
    return segmentation == label_or_region


def confusion_counts(
    reference: np.ndarray, prediction: np.ndarray, ignore_mask: np.ndarray | None = None
) -> tuple[int, int, int, int]:
    """``(tp, fp, fn, tn)`` of two boolean masks, not counting voxels in ``ignore_mask``."""
    use = np.ones_like(reference, dtype=bool) if ignore_mask is None else ~ignore_mask
    ref, pred = reference & use, prediction & use
    tp = int(np.count_nonzero(ref & pred))
    fp = int(np.count_nonzero(pred)) - tp
    fn = int(np.count_nonzero(ref)) - tp
    tn = int(np.count_nonzero(use)) - tp - fp - fn
    return tp, fp, fn, tn


def metrics_from_counts(tp: int, fp: int, fn: int, tn: int) -> dict[str, float | int]:
    """Dice and IoU (NaN when the class is absent from both) plus the counts."""
    denominator = tp + fp + fn
    dice = math.nan if denominator == 0 else 2 * tp / (2 * tp + fp + fn)
    iou = math.nan if denominator == 0 else tp / denominator
    return {
        "Dice": dice,
        "IoU": iou,
        "FP": fp,
        "TP": tp,
        "FN": fn,
        "TN": tn,
        "n_pred": fp + tp,
        "n_ref": fn + tp,
    }


def compute_metrics(
    reference: np.ndarray,
    prediction: np.ndarray,
    classes: Sequence[LabelOrRegion],
    ignore_label: int | None = None,
    surface: SurfaceSettings | None = None,
    spacing: Sequence[float] | None = None,
) -> dict[LabelOrRegion, dict[str, Any]]:
    """Metrics per label/region of one case (arrays of equal shape, ``(1, z, y, x)``); with
    ``surface``, HD95 and NSD too (``spacing`` in mm, numpy order of the spatial axes)."""
    ignore_mask = reference == ignore_label if ignore_label is not None else None
    result = {}
    for c in classes:
        ref, pred = region_mask(reference, c), region_mask(prediction, c)
        result[c] = metrics_from_counts(*confusion_counts(ref, pred, ignore_mask))
        if surface is not None:
            if ignore_mask is not None:
                ref, pred = ref & ~ignore_mask, pred & ~ignore_mask
            spatial = list(spacing)[-(ref.ndim - 1) :]
            tolerance = surface.tolerance(label_key(c))
            result[c].update(surface_metrics(ref[0], pred[0], spatial, tolerance))
    return result


def _without_case(problem: str, identifier: str) -> str:
    """verify's line without its ``case X:`` prefix (the full path names the file here)."""
    prefix = f"case {identifier}: "
    return problem[len(prefix) :] if problem.startswith(prefix) else problem


def read_checked(path: str | Path) -> tuple[np.ndarray, FileImage]:
    """A reference or prediction as ``(1, z, y, x)`` plus the file as read, with verify's checks:
    a truncated or corrupt file (ITK would read it as zeros: all background, Dice 0) or NaN/inf
    voxels are a DatasetError naming the file."""
    path = Path(path)
    try:
        image = read_checked_label(path, str(path), path.name, readers_for_file(path))
    except DatasetError as exc:
        raise DatasetError(_without_case(str(exc), path.name)) from None
    return image.array, image


def compute_metrics_for_files(
    reference_file: str | Path,
    prediction_file: str | Path,
    classes: Sequence[LabelOrRegion],
    ignore_label: int | None = None,
    surface: SurfaceSettings | None = None,
) -> dict[str, Any]:
    """One ``metric_per_case`` entry: ``{reference_file, prediction_file, metrics}``.

    Both files are checked as ``verify`` checks a label (complete, finite), and the prediction
    must have the reference's shape, spacing, origin and direction (verify's tolerances)."""
    reference, ref_image = read_checked(reference_file)
    prediction, pred_image = read_checked(prediction_file)
    if reference.shape != prediction.shape:
        msg = (
            f"{prediction_file}: shape {prediction.shape[1:]} differs from the reference "
            f"{reference_file} {reference.shape[1:]}"
        )
        raise DatasetError(msg)
    name = Path(prediction_file).name
    problems = geometry_problems(
        name, (f"the reference {reference_file}", ref_image), (str(prediction_file), pred_image)
    )
    if problems:
        raise DatasetError(_without_case(problems[0], name))
    return {
        "reference_file": str(reference_file),
        "prediction_file": str(prediction_file),
        "metrics": compute_metrics(
            reference, prediction, classes, ignore_label, surface, ref_image.spacing
        ),
    }


def _case_files(folder: Path, file_ending: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(file_ending) and p.is_file())


def _pairs(gt_dir: Path, pred_dir: Path, file_ending: str, chill: bool) -> list[tuple[Path, Path]]:
    """(reference, prediction) per case; ``chill`` evaluates only the predicted cases."""
    for folder, what in ((gt_dir, "reference"), (pred_dir, "prediction")):
        if not folder.is_dir():
            msg = f"{folder}: {what} folder not found"
            raise DatasetError(msg)
    references = _case_files(gt_dir, file_ending)
    predictions = _case_files(pred_dir, file_ending)
    if chill:
        unknown = sorted(set(predictions) - set(references))
        if unknown:
            msg = f"{pred_dir}: no reference in {gt_dir} for prediction(s) {', '.join(unknown[:5])}"
            raise DatasetError(msg)
        names = predictions
    else:
        missing = sorted(set(references) - set(predictions))
        if missing:
            cases = ", ".join(m[: -len(file_ending)] for m in missing[:5])
            more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
            msg = (
                f"{pred_dir}: missing prediction for case(s) {cases}{more} (reference in {gt_dir})"
            )
            raise DatasetError(msg)
        names = references
    if not names:
        msg = f"{pred_dir}: no predictions ending in {file_ending} to evaluate"
        raise DatasetError(msg)
    return [(gt_dir / n, pred_dir / n) for n in names]


def _nanmean(values: list[float]) -> float:
    with warnings.catch_warnings():  # all-NaN (class absent everywhere) is an expected NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(np.asarray(values, dtype=np.float64)))


def metric_names(per_case: list[dict[str, Any]]) -> tuple[str, ...]:
    """The averaged metrics: upstream's, plus HD95 and NSD where the cases have them."""
    first = next((m for case in per_case for m in case["metrics"].values()), {})
    return METRIC_NAMES + tuple(n for n in SURFACE_METRIC_NAMES if n in first)


def summarize(per_case: list[dict[str, Any]], classes: Sequence[LabelOrRegion]) -> dict[str, Any]:
    """``{metric_per_case, mean, foreground_mean}`` from per-case entries (keys still labels)."""
    names = metric_names(per_case)
    mean = {
        c: {m: _nanmean([case["metrics"][c][m] for case in per_case]) for m in names}
        for c in classes
    }
    foreground = [c for c in classes if c != 0]
    foreground_mean = {m: float(np.mean([mean[c][m] for c in foreground])) for m in names}
    return {"metric_per_case": per_case, "mean": mean, "foreground_mean": foreground_mean}


def compute_metrics_on_folder(
    gt_dir: str | Path,
    pred_dir: str | Path,
    file_ending: str,
    label_spec: LabelSpec,
    num_processes: int = 1,
    output_file: str | Path | None = None,
    chill: bool = False,
    classes: Sequence[LabelOrRegion] | None = None,
    surface: SurfaceSettings | None = None,
) -> dict[str, Any]:
    """Evaluate every reference case (``chill``: only the predicted ones) and summarize.

    ``classes`` defaults to ``labels_or_regions(label_spec)`` (``classes_from_dataset_json`` gives
    upstream's region keys). Writes ``output_file`` with ``save_summary_json`` when given.
    """
    gt_dir, pred_dir = Path(gt_dir), Path(pred_dir)
    classes = list(labels_or_regions(label_spec) if classes is None else classes)
    if surface is not None:
        check_tolerance_labels(surface, [label_key(c) for c in classes])
    pairs = _pairs(gt_dir, pred_dir, file_ending, chill)
    tasks = [
        (pred.name[: -len(file_ending)], (ref, pred, classes, label_spec.ignore_label, surface))
        for ref, pred in pairs
    ]
    if surface is not None and num_processes > 1 and len(tasks) > 1:
        load_surface_metric_libraries()
    results = map_cases(compute_metrics_for_files, tasks, num_processes, "evaluate")
    summary = summarize(list(results.values()), classes)
    if output_file is not None:
        save_summary_json(summary, output_file)
    return summary


def summary_for_json(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with string keys (labels ``"1"``, regions ``"(1, 2)"``)."""
    return {
        "foreground_mean": dict(summary["foreground_mean"]),
        "mean": {label_key(k): v for k, v in summary["mean"].items()},
        "metric_per_case": [
            {**case, "metrics": {label_key(k): v for k, v in case["metrics"].items()}}
            for case in summary["metric_per_case"]
        ],
    }


def save_summary_json(summary: dict[str, Any], output_file: str | Path) -> None:
    """Write the summary atomically, keys sorted (``foreground_mean`` first), NaN kept as NaN."""
    write_json(output_file, summary_for_json(summary), sort_keys=True)
