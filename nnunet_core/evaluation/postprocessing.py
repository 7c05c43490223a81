"""Postprocessing chosen on cross-validation: keep only the largest connected component.

Upstream's ``determine_postprocessing``, step by step on the predictions of the winner:

1. Keep the largest component of all foreground labels together (the labels, also for region
   datasets). Accepted if ``foreground_mean`` Dice rises strictly and no class's mean Dice falls
   (NaN compares false both ways, so a NaN class never blocks and a NaN mean never accepts).
2. With more than one label/region, for each in ``dataset.json`` order, on top of what was
   accepted so far: keep that label's/region's largest component; accepted if its mean Dice
   rises strictly.

Components use full connectivity (26 in 3-D) and every component of the largest size is kept
(upstream's ``remove_all_but_largest_component``); removed voxels become background. The outcome
is ``postprocessing.json`` in plain JSON (upstream's keys ``postprocessing_fns`` and
``postprocessing_kwargs``, no pickle) plus the steps tried and their effect, and
``postprocessed/`` with the final segmentations and their ``summary.json``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.crossval import case_files, link_or_copy
from nnunet_core.evaluation.metrics import (
    LabelOrRegion,
    classes_from_dataset_json,
    compute_metrics,
    compute_metrics_on_folder,
    label_key,
    summarize,
    summary_for_json,
)
from nnunet_core.evaluation.postprocessing_file import KEEP_LARGEST, Step, read_postprocessing
from nnunet_core.io.atomic import write_json
from nnunet_core.io.dataset_json import DatasetJson
from nnunet_core.io.images import read_seg, write_seg
from nnunet_core.io.removal import remove_tree
from nnunet_core.layout.results import POSTPROCESSED_FOLDER, POSTPROCESSING_JSON, SUMMARY_JSON
from nnunet_core.runtime.parallel import map_cases


def _labels_of(labels_or_regions: Any) -> list[int]:
    """Flatten an int, a region or a list of both into the labels whose union is processed."""
    if isinstance(labels_or_regions, list | tuple):
        return sorted({x for item in labels_or_regions for x in _labels_of(item)})
    return [int(labels_or_regions)]


def largest_component_mask(mask: np.ndarray) -> np.ndarray:
    """The largest connected component(s) of ``mask`` (full connectivity; ties all kept)."""
    structure = ndimage.generate_binary_structure(mask.ndim, mask.ndim)
    labelled, count = ndimage.label(mask, structure=structure)
    if count <= 1:
        return mask.copy()
    sizes = np.bincount(labelled.ravel())[1:]
    keep = np.flatnonzero(sizes == sizes.max()) + 1
    return np.isin(labelled, keep)


def keep_largest_component(
    segmentation: np.ndarray, labels_or_regions: Any, background: int = 0
) -> np.ndarray:
    """Set the voxels of ``labels_or_regions`` outside their largest component to background."""
    mask = np.isin(segmentation, np.asarray(_labels_of(labels_or_regions)))
    result = segmentation.copy()
    result[mask & ~largest_component_mask(mask)] = background
    return result


def apply_steps(segmentation: np.ndarray, steps: Sequence[Step]) -> np.ndarray:
    for step in steps:
        if step["function"] != KEEP_LARGEST:
            msg = f"unknown postprocessing function {step['function']!r}"
            raise DatasetError(msg)
        segmentation = keep_largest_component(segmentation, step["labels_or_regions"])
    return segmentation


def _as_json_value(labels_or_regions: Any) -> Any:
    if isinstance(labels_or_regions, list | tuple):
        return [_as_json_value(x) for x in labels_or_regions]
    return int(labels_or_regions)


def make_step(labels_or_regions: Any) -> Step:
    return {"function": KEEP_LARGEST, "labels_or_regions": _as_json_value(labels_or_regions)}


def load_postprocessing(path: str | Path) -> list[Step]:
    """The accepted steps of a ``postprocessing.json`` (ours or upstream's)."""
    path = Path(path)
    if path.suffix == ".pkl":
        msg = (
            f"{path}: pickles are not read; pass the postprocessing.json next to it (written by "
            "`nnunet-core find-best-config`)"
        )
        raise DatasetError(msg)
    if not path.is_file():
        msg = f"{path}: postprocessing file not found (written by `nnunet-core find-best-config`)"
        raise DatasetError(msg)
    return read_postprocessing(path)[1]  # a malformed file is one line naming it


def postprocess_file(source: Path, target: Path, steps: Sequence[Step]) -> None:
    segmentation, properties = read_seg(source)
    result = apply_steps(segmentation[0], steps)
    write_seg(result, target, properties)  # atomic, sidecar files included


def apply_postprocessing_to_folder(
    input_dir: str | Path,
    output_dir: str | Path,
    steps: Sequence[Step],
    file_ending: str,
    num_processes: int = 1,
) -> list[str]:
    """Apply ``steps`` to every ``{case}{file_ending}`` of ``input_dir``; returns the cases."""
    input_dir, output_dir = Path(input_dir), Path(output_dir)
    if not input_dir.is_dir():
        msg = f"{input_dir}: input folder not found"
        raise DatasetError(msg)
    cases = case_files(input_dir, file_ending)
    output_dir.mkdir(parents=True, exist_ok=True)
    tasks = [
        (case, (path, output_dir / f"{case}{file_ending}", list(steps)))
        for case, path in cases.items()
    ]
    map_cases(postprocess_file, tasks, num_processes, "postprocess")
    return list(cases)


def _postprocess_and_score(
    source: Path,
    target: Path,
    reference: Path,
    step: Step,
    classes: list[LabelOrRegion],
    ignore_label: int | None,
) -> dict[str, Any]:
    """Apply one step to one case, write it, and return its ``metric_per_case`` entry."""
    postprocess_file(source, target, [step])
    ref, _ = read_seg(reference)
    pred, _ = read_seg(target)
    return {
        "reference_file": str(reference),
        "prediction_file": str(target),
        "metrics": compute_metrics(ref, pred, classes, ignore_label),
    }


def _try_step(
    source_dir: Path,
    target_dir: Path,
    gt_dir: Path,
    step: Step,
    dataset_json: DatasetJson,
    num_processes: int,
) -> dict[str, Any]:
    classes = classes_from_dataset_json(dataset_json)
    ending = dataset_json.file_ending
    target_dir.mkdir(parents=True)
    tasks = [
        (
            case,
            (
                path,
                target_dir / path.name,
                gt_dir / path.name,
                step,
                classes,
                dataset_json.label_spec.ignore_label,
            ),
        )
        for case, path in case_files(source_dir, ending).items()
    ]
    per_case = map_cases(_postprocess_and_score, tasks, num_processes, "postprocessing")
    return summary_for_json(summarize(list(per_case.values()), classes))


def _dice(summary: dict[str, Any], key: str | None = None) -> float:
    return summary["foreground_mean"]["Dice"] if key is None else summary["mean"][key]["Dice"]


def _accept_foreground_step(before: dict[str, Any], after: dict[str, Any]) -> bool:
    if not _dice(after) > _dice(before):
        return False
    return not any(_dice(after, key) < _dice(before, key) for key in after["mean"])


def determine_postprocessing(
    prediction_dir: str | Path,
    gt_dir: str | Path,
    dataset_json: DatasetJson,
    num_processes: int = 1,
) -> dict[str, Any]:
    """Decide the steps on ``prediction_dir``; write ``postprocessing.json`` and ``postprocessed/``.

    Returns the content of ``postprocessing.json``.
    """
    prediction_dir, gt_dir = Path(prediction_dir), Path(gt_dir)
    ending = dataset_json.file_ending
    classes = classes_from_dataset_json(dataset_json)
    if set(case_files(gt_dir, ending)) - set(case_files(prediction_dir, ending)):
        print(
            f"warning: {prediction_dir} lacks predictions for some cases in {gt_dir}; "
            "postprocessing should be decided on all of them",
            file=sys.stderr,
        )
    baseline = summary_for_json(
        compute_metrics_on_folder(
            gt_dir,
            prediction_dir,
            ending,
            dataset_json.label_spec,
            num_processes,
            chill=True,
            classes=classes,
        )
    )
    output = prediction_dir / POSTPROCESSED_FOLDER
    remove_tree(output, inside=[prediction_dir])
    work = output / "temp"
    output.mkdir(parents=True)
    source, current, accepted, tried = prediction_dir, baseline, [], []
    candidates: list[tuple[Step, str | None]] = [
        (make_step(list(dataset_json.label_spec.foreground_labels)), None)
    ]
    if len(classes) > 1:
        candidates += [(make_step(c), label_key(c)) for c in classes]
    for index, (step, key) in enumerate(candidates):
        target = work / f"step_{index}"
        after = _try_step(source, target, gt_dir, step, dataset_json, num_processes)
        if key is None:
            ok = _accept_foreground_step(current, after)
        else:
            ok = _dice(after, key) > _dice(current, key)
        tried.append(
            {
                **step,
                "scope": "all foreground" if key is None else key,
                "criterion": "foreground_mean Dice rises, no class falls"
                if key is None
                else f"Dice of {key} rises",
                "dice_before": _dice(current, key),
                "dice_after": _dice(after, key),
                "foreground_mean_dice_before": _dice(current),
                "foreground_mean_dice_after": _dice(after),
                "accepted": ok,
            }
        )
        if ok:
            accepted.append(step)
            if source != prediction_dir:
                remove_tree(source, inside=[work])
            source, current = target, after
        else:
            remove_tree(target, inside=[work])
    for path in case_files(source, ending).values():
        link_or_copy(path, output / path.name)
    remove_tree(work, inside=[output])
    write_json(output / SUMMARY_JSON, current, sort_keys=True)
    result = {
        "input_folder": {k: baseline[k] for k in ("foreground_mean", "mean")},
        "postprocessed": {k: current[k] for k in ("foreground_mean", "mean")},
        "postprocessing_fns": [s["function"] for s in accepted],
        "postprocessing_kwargs": [{"labels_or_regions": s["labels_or_regions"]} for s in accepted],
        "steps_tried": tried,
    }
    write_json(prediction_dir / POSTPROCESSING_JSON, result)
    return result
