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
from nnunet_core.io.atomic import atomic_path, write_json
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.io.readers import reader_for_plans
from nnunet_core.preprocessing.cropping import slicer
from nnunet_core.preprocessing.resampling import (
    ANISO_THRESHOLD,
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
    kwargs = probability_resampling_kwargs(configuration, where)
    plan = plan_resampling(
        target_shape,
        current_spacing,
        target_spacing,
        kwargs.get("force_separate_z"),
        kwargs.get("separate_z_anisotropy_threshold", ANISO_THRESHOLD),
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


def _write_npz(path: Path, probabilities: np.ndarray) -> None:
    with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, probabilities=probabilities)


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
    them. Returns the segmentation's path.
    """
    output = Path(output_path_without_ending)
    where = f"export {output.name}"
    resampled = resample_logits_to_original(logits, properties, plans, configuration, where)
    del logits
    bbox = properties["bbox_used_for_cropping"]
    shape_before = [int(s) for s in properties["shape_before_cropping"]]
    backward = list(plans.transpose_backward)
    probabilities = None
    if save_probabilities:
        probabilities = apply_inference_nonlin(resampled, label_spec, inplace=True)
        segmentation = probabilities_to_segmentation(probabilities, label_spec)
    else:
        segmentation = logits_to_segmentation(resampled, label_spec)
    del resampled
    segmentation = revert_cropping(segmentation, bbox, shape_before).transpose(backward)
    seg_path = output.with_name(output.name + file_ending)
    # the plans' reader writes the result back (atomically), in the input's own geometry
    writer = reader_for_plans(plans, where)
    writer.write_seg(np.ascontiguousarray(segmentation), seg_path, properties)
    del segmentation
    if probabilities is not None:
        fill = None if label_spec.has_regions else 1.0
        full = revert_cropping(probabilities, bbox, shape_before, fill)
        del probabilities
        _write_npz(
            output.with_name(output.name + ".npz"), full.transpose([0, *(a + 1 for a in backward)])
        )
        del full
        write_json(output.with_name(output.name + ".json"), properties)
    return seg_path
