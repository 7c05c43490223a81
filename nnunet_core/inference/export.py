"""Turn a case's logits (preprocessed space) into files in the input image's space.

Upstream's ``export_prediction_from_logits``: resample the logits to the cropped shape at the
original spacing (``resampling_fn_probabilities``, order 1 / order_z 0), argmax (labels) or paint
the regions in ``regions_class_order`` where sigmoid > 0.5, paste into the uncropped volume (0
outside the bbox), transpose back and write with the input's geometry by the plans' reader. With
probabilities, also ``{case}.npz`` ('probabilities', float32, background 1 outside the bbox for
labels) and the properties as ``{case}.json`` (upstream writes a pickle). Every file is written
atomically.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import expit

from nnunet_core.errors import ConfigurationError
from nnunet_core.inference.npz_stream import ProbabilityFile
from nnunet_core.io.atomic import write_json
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.io.readers import reader_for_plans
from nnunet_core.preprocessing.cropping import slicer
from nnunet_core.preprocessing.resampling import (
    ANISO_THRESHOLD,
    ResamplePlan,
    plan_resampling,
    resample,
    resampling_kwargs,
)

if TYPE_CHECKING:
    import torch

# upstream's planner always writes these; a plans file without them gets the same defaults
PROBABILITY_KWARGS_DEFAULT = {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None}


def _is_tensor(value: Any) -> bool:
    """A torch tensor? Without importing torch (seconds per process): the ensembling and
    postprocessing jobs export numpy arrays only, and a tensor exists only where torch is loaded."""
    torch_module = sys.modules.get("torch")
    return torch_module is not None and isinstance(value, torch_module.Tensor)


def _torch_threads() -> int:
    torch_module = sys.modules.get("torch")
    return torch_module.get_num_threads() if torch_module is not None else 1


def _as_float32_numpy(logits: torch.Tensor | np.ndarray) -> np.ndarray:
    if _is_tensor(logits):
        return logits.detach().cpu().float().numpy()
    return np.asarray(logits, dtype=np.float32)


def _dtype_of(logits: torch.Tensor | np.ndarray) -> np.dtype:
    if _is_tensor(logits):
        return np.dtype(str(logits.dtype).removeprefix("torch."))
    return np.asarray(logits).dtype


def probability_resampling_kwargs(configuration: Configuration, where: str) -> dict[str, Any]:
    """The configuration's ``resampling_fn_probabilities_kwargs`` (order 1, order_z 0 if absent)."""
    if not configuration.has("resampling_fn_probabilities_kwargs"):
        raw = configuration.raw
        raw["resampling_fn_probabilities_kwargs"] = PROBABILITY_KWARGS_DEFAULT
        configuration = Configuration(configuration.name, raw, configuration.where)
    return resampling_kwargs(configuration, "probabilities", where)


def probability_resampling_plan(
    configuration: Configuration,
    target_shape: Sequence[int],
    current_spacing: Sequence[float],
    target_spacing: Sequence[float],
    where: str,
) -> tuple[ResamplePlan, dict[str, Any]]:
    """How probabilities go from ``current_spacing`` to ``target_shape``: the plan (separate z
    or not) and the configuration's probability resampling kwargs (order, order_z)."""
    kwargs = probability_resampling_kwargs(configuration, where)
    plan = plan_resampling(
        target_shape,
        current_spacing,
        target_spacing,
        kwargs.get("force_separate_z"),
        kwargs.get("separate_z_anisotropy_threshold", ANISO_THRESHOLD),
    )
    return plan, kwargs


def resample_probabilities(
    array: np.ndarray,
    target_shape: Sequence[int],
    current_spacing: Sequence[float],
    target_spacing: Sequence[float],
    configuration: Configuration,
    where: str,
) -> np.ndarray:
    """``array`` (C, ...) resampled to ``target_shape`` with the configuration's probability
    resampling (its order, order_z and separate-z rule): export and the next-stage files alike."""
    plan, kwargs = probability_resampling_plan(
        configuration, target_shape, current_spacing, target_spacing, where
    )
    return resample(array, plan, False, kwargs["order"], kwargs["order_z"])


def resample_logits_to_original(
    logits: torch.Tensor | np.ndarray,
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    where: str = "export",
) -> np.ndarray:
    """``(C, *shape_after_cropping_and_before_resampling)`` float32 logits at the original spacing.

    The network spacing is the configuration's (for 2-D: the case's own slice spacing first);
    the target is the case's spacing in the transposed (preprocessed) axis order. The result
    never shares memory with ``logits``.
    """
    upstream_fp16 = _dtype_of(logits) == np.float16
    # upstream's float16 logits are resampled in float64 and stored back as float16
    array = np.asarray(logits, dtype=np.float64) if upstream_fp16 else _as_float32_numpy(logits)
    target_shape = [int(s) for s in properties["shape_after_cropping_and_before_resampling"]]
    if array.ndim != len(target_shape) + 1:
        msg = f"{where}: logits of shape {array.shape} do not match a {len(target_shape)}-D case"
        raise ConfigurationError(msg)
    axes = list(plans.transpose_forward)
    original_spacing = [float(properties["spacing"][a]) for a in axes]
    network_spacing = list(configuration.spacing)
    if len(network_spacing) < len(target_shape):
        network_spacing = [original_spacing[0], *network_spacing]
    resampled = resample_probabilities(
        array, target_shape, network_spacing, original_spacing, configuration, where
    )
    if upstream_fp16:
        return resampled.astype(np.float16).astype(np.float32)
    # nothing to resample returns the input itself: copy, so callers may edit the result in place
    return resampled.copy() if np.shares_memory(resampled, array) else resampled


def _segmentation_dtype(label_spec: LabelSpec) -> type:
    largest = max(label_spec.regions_class_order or (), default=0)
    if len(label_spec.foreground_labels) < 255 and largest < 256:
        return np.uint8
    return np.uint16


def _label_values(label_spec: LabelSpec, num_channels: int) -> np.ndarray | None:
    """Channel index -> label value, or None where they are equal (consecutive labels)."""
    values = np.asarray((0, *label_spec.foreground_labels))
    if len(values) != num_channels:
        msg = f"{num_channels} output channels but {len(values)} labels (incl. background)"
        raise ConfigurationError(msg)
    return None if np.array_equal(values, np.arange(len(values))) else values


def apply_inference_nonlin(
    logits: np.ndarray, label_spec: LabelSpec, inplace: bool = False
) -> np.ndarray:
    """Softmax over channels (labels) or sigmoid per channel (regions), float32."""
    out = logits if inplace else logits.copy()
    if label_spec.has_regions:
        return expit(out, out=out)
    np.subtract(out, out.max(axis=0, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=0, keepdims=True)
    return out


def probabilities_to_segmentation(probabilities: np.ndarray, label_spec: LabelSpec) -> np.ndarray:
    """Argmax (labels) or regions painted in ``regions_class_order`` where p > 0.5."""
    dtype = _segmentation_dtype(label_spec)
    if label_spec.has_regions:
        order = label_spec.regions_class_order or ()
        if len(order) != probabilities.shape[0]:
            msg = f"{probabilities.shape[0]} output channels but {len(order)} regions"
            raise ConfigurationError(msg)
        segmentation = np.zeros(probabilities.shape[1:], dtype=dtype)
        for channel, label in zip(probabilities, order, strict=True):
            segmentation[channel > 0.5] = label
        return segmentation
    values = _label_values(label_spec, probabilities.shape[0])
    index = probabilities.argmax(axis=0)
    return (index if values is None else values[index]).astype(dtype)


def logits_to_segmentation(logits: np.ndarray, label_spec: LabelSpec) -> np.ndarray:
    """Segmentation straight from logits: softmax does not change the argmax, so it is skipped."""
    if label_spec.has_regions:
        return probabilities_to_segmentation(apply_inference_nonlin(logits, label_spec), label_spec)
    return probabilities_to_segmentation(logits, label_spec)


def revert_cropping(
    cropped: np.ndarray,
    bbox: Sequence[Sequence[int]],
    shape_before_cropping: Sequence[int],
    fill_first_channel: float | None = None,
) -> np.ndarray:
    """Paste ``cropped`` (``(*spatial)`` or ``(C, *spatial)``) into zeros of the uncropped shape.

    ``fill_first_channel`` sets channel 0 outside the bbox (1 for background probabilities).
    """
    lead = cropped.ndim - len(shape_before_cropping)
    if len(bbox) != len(shape_before_cropping):
        msg = f"bbox {list(bbox)} does not fit the uncropped shape {list(shape_before_cropping)}"
        raise ConfigurationError(msg)
    full = np.zeros((*cropped.shape[:lead], *shape_before_cropping), dtype=cropped.dtype)
    if fill_first_channel is not None:
        full[0] = fill_first_channel
    inside = (slice(None),) * lead + slicer([list(b) for b in bbox])
    if full[inside].shape != cropped.shape:
        msg = (
            f"cropped prediction {cropped.shape} does not fit bbox {list(bbox)} of "
            f"{list(shape_before_cropping)}"
        )
        raise ConfigurationError(msg)
    full[inside] = cropped
    return full


def _probability_plan(
    shape: Sequence[int],
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    where: str,
) -> tuple[ResamplePlan, dict[str, Any]]:
    """The resampling of ``(C, *shape)`` logits back to the cropped original spacing, and the
    configuration's probability kwargs (what ``resample_logits_to_original`` does)."""
    target_shape = [int(s) for s in properties["shape_after_cropping_and_before_resampling"]]
    if len(shape) != len(target_shape) + 1:
        msg = f"{where}: logits of shape {tuple(shape)} do not match a {len(target_shape)}-D case"
        raise ConfigurationError(msg)
    original_spacing = [float(properties["spacing"][a]) for a in plans.transpose_forward]
    network_spacing = list(configuration.spacing)
    if len(network_spacing) < len(target_shape):
        network_spacing = [original_spacing[0], *network_spacing]
    return probability_resampling_plan(
        configuration, target_shape, network_spacing, original_spacing, where
    )


def _check_bbox(bbox: Sequence[Sequence[int]], shape_before: Sequence[int], cropped: Sequence[int]):
    fits = len(bbox) == len(shape_before) and all(
        0 <= lo <= hi <= n and hi - lo == c
        for (lo, hi), n, c in zip(bbox, shape_before, cropped, strict=False)
    )
    if not fits:
        msg = (
            f"cropped prediction {list(cropped)} does not fit bbox {list(bbox)} of "
            f"{list(shape_before)}"
        )
        raise ConfigurationError(msg)


def _slab_segmentation(
    scores: torch.Tensor, label_spec: LabelSpec, values: np.ndarray | None, dtype: type
) -> np.ndarray:
    """Argmax of logits or probabilities, or regions painted where p > 0.5, of one slab."""
    if label_spec.has_regions:
        segmentation = np.zeros(scores.shape[1:], dtype=dtype)
        for channel, label in zip(
            scores.numpy(), label_spec.regions_class_order or (), strict=True
        ):
            segmentation[channel > 0.5] = label
        return segmentation
    # torch.max's indices: 1.5-4x numpy's argmax over the short class axis (torch.argmax is
    # slower still); the first of equal maxima, as numpy
    index = scores.max(0).indices.numpy()
    return (index if values is None else values[index]).astype(dtype)


def _write_probability_rows(
    spill: ProbabilityFile,
    probabilities: np.ndarray,
    first_row: int,
    bbox: Sequence[Sequence[int]],
    fill: float | None,
) -> None:
    """One slab's probabilities into the uncropped rows (background 1 outside the box)."""
    full_width = [tuple(b) == (0, n) for b, n in zip(bbox[1:], spill.shape[2:], strict=True)]
    if not all(full_width):
        rows = np.zeros((probabilities.shape[0], probabilities.shape[1], *spill.shape[2:]),
                        dtype=np.float32)  # fmt: skip
        if fill is not None:
            rows[0] = fill
        rows[(slice(None), slice(None), *(slice(lo, hi) for lo, hi in bbox[1:]))] = probabilities
        probabilities = rows
    spill.write_rows(first_row, probabilities)


def exported_files(folder: Path, case_id: str, file_ending: str, probabilities: bool) -> list[Path]:
    """The files ``export_prediction`` writes for a case into ``folder``, in the order it writes
    them (the segmentation; with probabilities the ``.npz``, then the properties' ``.json``)."""
    files = [folder / f"{case_id}{file_ending}"]
    if probabilities:
        files += [folder / f"{case_id}.npz", folder / f"{case_id}.json"]
    return files


def export_prediction(
    logits: torch.Tensor | np.ndarray,
    properties: dict[str, Any],
    plans: Plans,
    configuration: Configuration,
    label_spec: LabelSpec,
    output_path_without_ending: str | Path,
    file_ending: str,
    save_probabilities: bool = False,
) -> Path:
    """Write ``{output}{file_ending}`` (and with probabilities ``{output}.npz`` + ``.json``).

    ``logits`` are ``(C, *preprocessed spatial)``; ``configuration`` is the one that predicted
    them. Returns the segmentation's path. The case is resampled in slabs of rows of the output
    (``resample_slabs``), already in the input image's axis order, so no class is ever held at
    full size: the segmentation fills in row by row, the probabilities go through a spill file.
    """
    # torch loads here, not with the module: ensembling imports this module for numpy only
    from nnunet_core.inference.resample_slabs import resampled_slabs, rounded_to_float16

    output = Path(output_path_without_ending)
    where = f"export {output.name}"
    plan, kwargs = _probability_plan(tuple(logits.shape), properties, plans, configuration, where)
    bbox = [[int(v) for v in b] for b in properties["bbox_used_for_cropping"]]
    shape_before = [int(s) for s in properties["shape_before_cropping"]]
    _check_bbox(bbox, shape_before, plan.new_shape)
    backward = list(plans.transpose_backward)
    final_shape = [shape_before[a] for a in backward]
    final_bbox = [bbox[a] for a in backward]
    half = _dtype_of(logits) == np.float16
    dtype = _segmentation_dtype(label_spec)
    num_classes = int(logits.shape[0])
    if label_spec.has_regions and len(label_spec.regions_class_order or ()) != num_classes:
        order = label_spec.regions_class_order or ()
        msg = f"{num_classes} output channels but {len(order)} regions"
        raise ConfigurationError(msg)
    values = None if label_spec.has_regions else _label_values(label_spec, num_classes)
    segmentation = np.zeros(final_shape, dtype=dtype)
    fill = None if label_spec.has_regions else 1.0
    spill = None
    if save_probabilities:
        output.parent.mkdir(parents=True, exist_ok=True)
        spill = ProbabilityFile(output.parent, (num_classes, *final_shape))
    try:
        slabs = resampled_slabs(logits, plan, kwargs["order"], kwargs["order_z"], backward)
        for first, slab in slabs:
            if half:  # upstream keeps float16 logits float16 after resampling
                slab = rounded_to_float16(slab)
            scores = slab
            if save_probabilities or label_spec.has_regions:
                scores = torch_nonlin(slab, label_spec)
            row = final_bbox[0][0] + first
            inside = (
                slice(row, row + slab.shape[1]),
                *(slice(lo, hi) for lo, hi in final_bbox[1:]),
            )
            segmentation[inside] = _slab_segmentation(scores, label_spec, values, dtype)
            if spill is not None:
                _write_probability_rows(spill, scores.numpy(), row, final_bbox, fill)
        del logits
        seg_path = output.with_name(output.name + file_ending)
        # the plans' reader writes the result back (atomically), in the input's own geometry
        reader_for_plans(plans, where).write_seg(segmentation, seg_path, properties)
        if spill is not None:
            if fill is not None:  # background 1 in the rows outside the box
                spill.fill_rows(0, 0, final_bbox[0][0], fill)
                spill.fill_rows(0, final_bbox[0][1], final_shape[0], fill)
            threads = _torch_threads()  # export workers: 1; this process: the job's cores
            spill.save_npz(output.with_name(output.name + ".npz"), threads)
            # compact: its class locations are long lists, read by programs only
            write_json(output.with_name(output.name + ".json"), properties, indent=None)
    finally:
        if spill is not None:
            spill.close()
    return seg_path


def torch_nonlin(logits: torch.Tensor, label_spec: LabelSpec) -> torch.Tensor:
    """Softmax over channels (labels) or sigmoid per channel (regions), float32, in torch."""
    return logits.sigmoid() if label_spec.has_regions else logits.softmax(0)
