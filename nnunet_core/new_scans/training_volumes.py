"""The range of each label's volume in the training labels, from what a model folder carries.

A shared model holds no training labels, but every fold's ``validation/summary.json`` counts the
voxels of each label in each validation case's reference (``n_ref``); the folds together cover
the training set. Times a voxel's volume, that gives the smallest and largest volume the model
saw for each label, so a prediction far outside it can be flagged (``quality.flags``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import SimpleITK as sitk

from nnunet_core.io.atomic import read_json
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.readers.sitk_io import SimpleITKIO
from nnunet_core.layout.results import PLANS_JSON, SUMMARY_JSON, fold_dirs_in, validation_dir
from nnunet_core.new_scans.quality import foreground_classes, voxel_ml

MEDIAN_SPACING_KEY = "original_median_spacing_after_transp"
# Files whose spacing ITK's header tells (a TIFF's spacing lives in a side file ITK ignores).
HEADER_ENDINGS = (*SimpleITKIO.endings, ".nii")


def _classes_of(key: str) -> tuple[int, ...]:
    """A summary's class key as sorted label values: ``"1"`` -> (1,), ``"(1, 2)"`` -> (1, 2)."""
    return tuple(sorted(int(v) for v in re.findall(r"\d+", key)))


def header_voxel_ml(path: Path) -> float | None:
    """A voxel's volume in ml from an image's header alone (no pixels read), or None when the
    file is missing, not one ITK reads with its spacing, or unreadable."""
    if not path.is_file() or not path.name.lower().endswith(HEADER_ENDINGS):
        return None
    reader = sitk.ImageFileReader()
    reader.SetFileName(str(path))
    try:
        reader.ReadImageInformation()
    except RuntimeError:
        return None
    return voxel_ml(reader.GetSpacing()[::-1], reader.GetSize()[::-1])


def plans_voxel_ml(model_dir: Path) -> float | None:
    """A voxel's volume from the plans' median spacing of the training images, or None."""
    try:
        spacing = read_json(model_dir / PLANS_JSON).get(MEDIAN_SPACING_KEY)
        return voxel_ml([float(s) for s in spacing]) if spacing else None
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _prediction_file(case: dict[str, Any], folder: Path) -> Path | None:
    """The case's validation prediction in ``folder``, found by its file name (the summary
    records the path where the model was trained, which a shared model no longer has)."""
    recorded = case.get("prediction_file")
    if not isinstance(recorded, str) or not recorded:
        return None
    return folder / re.split(r"[\\/]", recorded)[-1]


def _summaries(model_dir: Path) -> list[tuple[Path, list[dict[str, Any]]]]:
    """(validation folder, metric_per_case) of every fold with a readable summary."""
    found = []
    for fold in fold_dirs_in(model_dir):
        folder = validation_dir(fold)
        try:
            cases = read_json(folder / SUMMARY_JSON).get("metric_per_case")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(cases, list):
            found.append((folder, [c for c in cases if isinstance(c, dict)]))
    return found


def _reference_counts(case: dict[str, Any]) -> dict[tuple[int, ...], float]:
    """``n_ref`` of each class of a case's metrics, keyed by its sorted label values."""
    metrics = case.get("metrics")
    counts = {}
    for key, values in (metrics if isinstance(metrics, dict) else {}).items():
        count = values.get("n_ref") if isinstance(values, dict) else None
        if isinstance(count, int | float) and not isinstance(count, bool):
            counts[_classes_of(str(key))] = float(count)
    return counts


def training_volume_ranges(
    model_dirs: Sequence[Path], label_spec: LabelSpec
) -> dict[str, tuple[float, float]] | None:
    """(smallest, largest) volume in ml of each foreground label or region in the validation
    references of every fold of ``model_dirs``; None when no summary gives one.

    A case's voxel volume comes from its validation prediction's header when the file is in the
    fold's validation folder (it has the reference's geometry, so this is exact). Otherwise it is
    the plans' median spacing of the training images (``original_median_spacing_after_transp``):
    an approximation, off by as much as a case's spacing differs from the median, so the range
    is only a guide there. A label the summaries do not list gets no range.
    """
    classes = [(name, tuple(sorted(values))) for name, values in foreground_classes(label_spec)]
    volumes: dict[str, list[float]] = {}
    for model_dir in model_dirs:
        summaries = _summaries(Path(model_dir))
        fallback = plans_voxel_ml(Path(model_dir)) if summaries else None
        for folder, cases in summaries:
            for case in cases:
                prediction = _prediction_file(case, folder)
                unit = header_voxel_ml(prediction) if prediction is not None else None
                unit = fallback if unit is None else unit
                if unit is None:
                    continue
                counts = _reference_counts(case)
                for name, values in classes:
                    if values in counts:
                        volumes.setdefault(name, []).append(counts[values] * unit)
    if not volumes:
        return None
    return {name: (min(found), max(found)) for name, found in volumes.items()}
