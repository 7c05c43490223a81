"""Preprocess cases as upstream's ``DefaultPreprocessor`` does, and whole datasets in parallel.

Per case, in upstream's order: float32, transpose, crop to nonzero, normalize (before
resampling), resample, sample class locations; seg is stored int16 and data float32. When one
call preprocesses several data identifiers (e.g. 2d and 3d_fullres), a case is read, cropped and
normalized once, and resampled slices and whole results are shared where they are equal.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.dataset.discovery import RawCase, training_cases
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import replace_folder, write_json
from nnunet_core.io.blosc2_store import FILE_MODE, save_case
from nnunet_core.io.dataset_json import DatasetJson
from nnunet_core.io.plans import Plans
from nnunet_core.io.readers import ImageReader, reader_for_plans
from nnunet_core.io.removal import remove_tree
from nnunet_core.layout.preprocessed import PREPROCESS_SUMMARY_JSON, preprocess_summary_file
from nnunet_core.layout.raw import IMAGES_TR
from nnunet_core.preprocessing.cropping import crop_to_nonzero, slicer
from nnunet_core.preprocessing.foreground import (
    locations_to_json,
    sample_class_locations,
    sampling_classes,
)
from nnunet_core.preprocessing.normalization import normalize
from nnunet_core.preprocessing.preprocessing_config import (
    PreprocessingConfig,
    config_sha256,
    group_by_identifier,
    preprocessing_config,
)
from nnunet_core.preprocessing.resampling import (
    ANISO_THRESHOLD,
    ResamplePlan,
    compute_new_shape,
    plan_resampling,
    resample,
)
from nnunet_core.runtime.parallel import map_cases

SUMMARY_NAME = PREPROCESS_SUMMARY_JSON  # the name lives in nnunet_core.layout.preprocessed


def _read_case(
    case: RawCase, reader: ImageReader
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    data, properties = reader.read_images(list(case.images))
    seg = None
    if case.label is not None:
        seg, _ = reader.read_seg(case.label)
        if seg.shape[1:] != data.shape[1:]:
            msg = (
                f"case {case.identifier}: label shape {seg.shape[1:]} differs from image shape "
                f"{data.shape[1:]}"
            )
            raise DatasetError(msg)
    return data, seg, properties


def iter_preprocessed(
    case: RawCase,
    plans: Plans,
    configs: Sequence[PreprocessingConfig],
    dataset_json: DatasetJson,
) -> Iterator[tuple[PreprocessingConfig, np.ndarray, np.ndarray | None, dict[str, Any]]]:
    """Yield ``(config, data float32, seg int16 | None, properties)`` per config for one case."""
    # the plans' reader, as upstream's preprocessor and predictor use it
    reader = reader_for_plans(plans, f"plans {plans.name}")
    raw, seg, properties = _read_case(case, reader)
    axes = list(plans.transpose_forward)
    order = [0, *(a + 1 for a in axes)]
    spacing = [properties["spacing"][a] for a in axes]
    has_seg = seg is not None
    shape_before = [raw.shape[1:][a] for a in axes]
    cropped, seg, bbox = crop_to_nonzero(
        raw.transpose(order), None if seg is None else seg.transpose(order)
    )
    properties.update(
        shape_before_cropping=shape_before,
        bbox_used_for_cropping=bbox,
        shape_after_cropping_and_before_resampling=list(cropped.shape[1:]),
    )
    # one normalized copy per distinct normalization, each a cropped view of a C-ordered array
    # like upstream's, so numpy's float32 reductions round the same way
    signatures = list(dict.fromkeys(_norm_signature(c) for c in configs))
    views = [raw.copy().transpose(order)[(slice(None), *slicer(bbox))] for _ in signatures[1:]]
    intensity = plans.foreground_intensity_properties
    normalized = {
        sig: normalize(view, seg, sig[0], sig[1], intensity, case.identifier)
        for sig, view in zip(signatures, [cropped, *views], strict=False)
    }
    del raw, cropped, views

    shape = properties["shape_after_cropping_and_before_resampling"]
    plans_of = [
        (_plan_for(c, "data", shape, spacing), _plan_for(c, "seg", shape, spacing)) for c in configs
    ]
    owners = [(_norm_signature(c), "seg") for c in configs]
    results = _Shared(k for c, p in zip(configs, plans_of, strict=True) for k in _result_keys(c, p))
    slices = _Shared(
        (owner, _slice_key(p))
        for pair, plan_pair in zip(owners, plans_of, strict=True)
        for owner, p in zip(pair, plan_pair, strict=True)
        if p.separate_axis is not None
    )
    classes = sampling_classes(dataset_json) if has_seg else []
    for config, (data_plan, seg_plan), (data_owner, _) in zip(
        configs, plans_of, owners, strict=True
    ):
        data_key, seg_key = _result_keys(config, (data_plan, seg_plan))
        data_cache = slices.shared((data_owner, _slice_key(data_plan)))
        data = results.get(
            data_key, _resample, normalized[data_owner], data_plan, config.data_kwargs, data_cache
        )
        config_props = dict(properties)
        out_seg = None
        if has_seg:
            seg_cache = slices.shared(("seg", _slice_key(seg_plan)))
            out_seg, config_props["class_locations"] = results.get(
                seg_key, _resample_seg, seg, seg_plan, config.seg_kwargs, seg_cache, classes
            )
        yield config, data, out_seg, config_props
        for key in (data_key, seg_key):
            results.done(key)
        for owner, plan in ((data_owner, data_plan), ("seg", seg_plan)):
            slices.done((owner, _slice_key(plan)))


def _resample(
    array: np.ndarray, plan: ResamplePlan, kwargs: tuple[tuple[str, Any], ...], cache: Any
) -> np.ndarray:
    kw = dict(kwargs)
    return resample(array, plan, bool(kw["is_seg"]), kw["order"], kw["order_z"], cache)


def _resample_seg(
    seg: np.ndarray,
    plan: ResamplePlan,
    kwargs: tuple[tuple[str, Any], ...],
    cache: Any,
    classes: Sequence[Any],
) -> tuple[np.ndarray, dict[str, Any]]:
    """Resampled int16 seg and its class locations (JSON-ready), computed together for sharing."""
    out = _resample(seg, plan, kwargs, cache).astype(np.int16, copy=False)
    return out, locations_to_json(sample_class_locations(out, classes))


class _Shared:
    """Values several configurations of a case can share, each dropped after its last user."""

    def __init__(self, keys: Iterable[Any]) -> None:
        self._total = Counter(keys)
        self._left = Counter(self._total)
        self._values: dict[Any, Any] = {}

    def get(self, key: Any, make: Callable[..., Any], *args: Any) -> Any:
        if key not in self._values:
            self._values[key] = make(*args)
        return self._values[key]

    def shared(self, key: Any) -> dict[Any, Any] | None:
        """A dict cache for ``key`` if more than one user will ask for it, else None."""
        return self.get(key, dict) if self._total[key] > 1 else None

    def done(self, key: Any) -> None:
        self._left[key] -= 1
        if self._left[key] <= 0:
            self._values.pop(key, None)


def _norm_signature(config: PreprocessingConfig) -> tuple[Any, ...]:
    return (config.normalization_schemes, config.use_mask_for_norm)


def _plan_for(
    config: PreprocessingConfig, kind: str, shape: Sequence[int], spacing: Sequence[float]
) -> ResamplePlan:
    target = list(config.spacing)
    if len(target) < len(shape):
        # 2d: the slice axis keeps its spacing, so it is never resampled
        target = [spacing[0], *target]
    kwargs = dict(config.data_kwargs if kind == "data" else config.seg_kwargs)
    threshold = kwargs.get("separate_z_anisotropy_threshold", ANISO_THRESHOLD)
    return plan_resampling(
        compute_new_shape(shape, spacing, target),
        spacing,
        target,
        kwargs.get("force_separate_z"),
        threshold,
    )


def _slice_key(plan: ResamplePlan) -> tuple[Any, ...]:
    return (
        plan.separate_axis,
        tuple(s for a, s in enumerate(plan.new_shape) if a != plan.separate_axis),
    )


def _result_keys(
    config: PreprocessingConfig, plans_of: tuple[ResamplePlan, ResamplePlan]
) -> tuple[Any, Any]:
    return (
        ("data", _norm_signature(config), plans_of[0], config.data_kwargs),
        ("seg", plans_of[1], config.seg_kwargs),
    )


def run_case(
    case: RawCase, plans: Plans, configuration: str, dataset_json: DatasetJson
) -> tuple[np.ndarray, np.ndarray | None, dict[str, Any]]:
    """Preprocess one case for one configuration: ``(data, seg, properties)`` (seg None without
    label)."""
    _, data, seg, properties = next(
        iter_preprocessed(case, plans, [preprocessing_config(plans, configuration)], dataset_json)
    )
    return data, seg, properties


def _case_task(
    case: RawCase,
    plans: Plans,
    configs: Sequence[PreprocessingConfig],
    dataset_json: DatasetJson,
    staging: dict[str, Path],
    nthreads: int,
) -> dict[str, Any]:
    start = time.perf_counter()
    shapes: dict[str, Any] = {}
    for config, data, seg, properties in iter_preprocessed(case, plans, configs, dataset_json):
        if seg is None:
            msg = f"case {case.identifier}: training cases need a label file"
            raise DatasetError(msg)
        folder = staging[config.data_identifier]
        save_case(folder, case.identifier, data, seg, properties, config.patch_size, nthreads)
        shapes[config.data_identifier] = {"data_shape": data.shape, "seg_shape": seg.shape}
    return {"identifiers": shapes, "seconds": round(time.perf_counter() - start, 4)}


def _remove_leftovers(preprocessed_dir: Path, identifier: str) -> None:
    """Staging and swapped-out folders of crashed runs (one run per identifier at a time)."""
    for pattern in (f".{identifier}.staging-*", f".{identifier}.old-*"):
        for path in preprocessed_dir.glob(pattern):
            with suppress(OSError):
                remove_tree(path, inside=[preprocessed_dir])


def preprocess_dataset(
    raw_dir: Path,
    preprocessed_dir: Path,
    plans: Plans,
    configurations: Sequence[str],
    dataset_json: DatasetJson,
    num_processes: int,
    plans_sha256: str = "",
    disable_progress: bool | None = None,
) -> dict[str, dict[str, Any]]:
    """Preprocess every training case into ``preprocessed_dir/<data_identifier>/``.

    Each identifier is written into a fresh staging folder and swapped in only when every case
    succeeded; ``preprocess_summary.json`` is written into it last. Returns the summaries.
    """
    start = time.perf_counter()
    configs = group_by_identifier(plans, configurations)
    cases = training_cases(raw_dir, dataset_json)
    if not cases:
        msg = f"{raw_dir}: no training cases in {IMAGES_TR}"
        raise DatasetError(msg)
    preprocessed_dir.mkdir(parents=True, exist_ok=True)
    staging: dict[str, Path] = {}
    nthreads = max(1, min(4, (os.cpu_count() or 1) // max(1, num_processes)))
    try:
        for config in configs:
            _remove_leftovers(preprocessed_dir, config.data_identifier)
            name = f".{config.data_identifier}.staging-{uuid.uuid4().hex[:8]}"
            staging[config.data_identifier] = preprocessed_dir / name
            staging[config.data_identifier].mkdir()
        tasks = [
            (c.identifier, (c, plans, configs, dataset_json, staging, nthreads)) for c in cases
        ]
        label = "+".join(c.data_identifier for c in configs)
        results = map_cases(
            _case_task, tasks, num_processes, f"preprocess {label}", disable_progress
        )
        for config in configs:
            replace_folder(
                staging.pop(config.data_identifier), preprocessed_dir / config.data_identifier
            )
    finally:
        for path in staging.values():
            with suppress(OSError):
                remove_tree(path, inside=[preprocessed_dir])
    seconds = round(time.perf_counter() - start, 3)
    summaries = {}
    for config in configs:
        summary = {
            "dataset_name": plans.dataset_name or raw_dir.name,
            "plans_name": plans.name,
            "configurations": list(config.configurations),
            "data_identifier": config.data_identifier,
            "plans_sha256": plans_sha256,
            "configuration_sha256": config_sha256(plans, config),
            "num_processes": num_processes,
            "shared_with": [c.data_identifier for c in configs if c is not config],
            "seconds": seconds,
            "cases": {
                case_id: {**r["identifiers"][config.data_identifier], "seconds": r["seconds"]}
                for case_id, r in results.items()
            },
        }
        target = preprocess_summary_file(preprocessed_dir, config.data_identifier)
        write_json(target, summary)
        os.chmod(target, FILE_MODE)
        summaries[config.data_identifier] = summary
    return summaries
