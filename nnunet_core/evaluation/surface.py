"""Surface metrics a paper reports next to Dice: HD95 and normalized surface distance (NSD).

Computed by MONAI (``compute_hausdorff_distance`` with ``percentile=95``,
``compute_surface_dice`` with a tolerance in mm), with the image spacing, so that distances are
in mm. Axes of size 1 (a 2-D image stored as one slice) are dropped first: a surface is the
boundary inside the image, not the image's own faces.

Empty masks follow the Metrics Reloaded recommendations (Maier-Hein et al., Nat. Methods 2024;
their reference implementation does the same):

- reference and prediction both empty: perfect agreement, HD95 0 mm and NSD 1;
- exactly one empty: the distance is undefined and must count as the worst case in the
  aggregation (leaving it out, as a NaN, would reward missing a structure). We store the worst
  value in the case itself: NSD 0, HD95 the image's diagonal in mm (no two voxels of the image
  are farther apart), and name the empty side in ``surface_empty``.

Voxels under the ignore label belong to neither mask.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from nnunet_core.errors import ConfigurationError

SURFACE_METRIC_NAMES = ("HD95", "NSD")
DEFAULT_TOLERANCE_MM = 1.0


@dataclass(frozen=True)
class SurfaceSettings:
    """NSD tolerance per label key (``"1"``, ``"(1, 2)"``) in mm; ``default_mm`` for the rest."""

    default_mm: float = DEFAULT_TOLERANCE_MM
    per_label_mm: Mapping[str, float] = field(default_factory=dict)

    def tolerance(self, key: str) -> float:
        return float(self.per_label_mm.get(key, self.default_mm))


def check_tolerance_labels(surface: SurfaceSettings, keys: Sequence[str]) -> None:
    """A per-label tolerance names a label or region that is evaluated (``keys``); another
    key (a typo, a label the dataset lacks) would silently get the default: one line instead."""
    unknown = sorted(set(surface.per_label_mm) - set(keys))
    if unknown:
        msg = (
            f"NSD tolerance for {unknown[0]!r}: the dataset has no such label or region "
            f"(its keys: {', '.join(keys)})"
        )
        raise ConfigurationError(msg)


def settings_from_tolerances(values: Sequence[str | float]) -> SurfaceSettings:
    """``["2"]`` (all labels 2 mm) or ``["1.5", "2=3"]`` (label 2: 3 mm, others 1.5): the
    command line's and the config's form; a value that is no positive number is a ValueError."""
    default, per_label = DEFAULT_TOLERANCE_MM, {}
    for value in values:
        key, _, number = str(value).rpartition("=")
        try:
            mm = float(number)
        except ValueError:
            mm = math.nan
        if not mm > 0 or math.isinf(mm):
            msg = f"NSD tolerance {value!r}: expected a positive number of mm, or LABEL=MM"
            raise ValueError(msg)
        if key:
            per_label[key.strip()] = mm
        else:
            default = mm
    return SurfaceSettings(default, per_label)


def image_diagonal_mm(shape: Sequence[int], spacing: Sequence[float]) -> float:
    """The largest distance between two voxel centres of the image, in mm."""
    return math.sqrt(sum(((n - 1) * s) ** 2 for n, s in zip(shape, spacing, strict=True)))


def _without_singleton_axes(
    reference: np.ndarray, prediction: np.ndarray, spacing: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    keep = [axis for axis, n in enumerate(reference.shape) if n > 1]
    squeeze = tuple(axis for axis, n in enumerate(reference.shape) if n == 1)
    return (
        np.squeeze(reference, axis=squeeze),
        np.squeeze(prediction, axis=squeeze),
        [float(spacing[axis]) for axis in keep],
    )


def surface_metrics(
    reference: np.ndarray,
    prediction: np.ndarray,
    spacing: Sequence[float],
    tolerance_mm: float,
) -> dict[str, float | str]:
    """``{"HD95": mm, "NSD": fraction}`` of two boolean masks of equal shape (numpy order, with
    ``spacing`` in the same order); ``surface_empty`` names the empty side, if one is."""
    if reference.shape != prediction.shape or len(spacing) != reference.ndim:
        msg = f"masks {reference.shape} / {prediction.shape} and spacing {list(spacing)} differ"
        raise ValueError(msg)
    has_reference, has_prediction = bool(reference.any()), bool(prediction.any())
    if not has_reference and not has_prediction:
        return {"HD95": 0.0, "NSD": 1.0}
    if not has_reference or not has_prediction:
        empty = "reference" if not has_reference else "prediction"
        worst = image_diagonal_mm(reference.shape, spacing)
        return {"HD95": worst, "NSD": 0.0, "surface_empty": empty}
    ref, pred, kept_spacing = _without_singleton_axes(reference, prediction, spacing)
    return {
        "HD95": _hd95(ref, pred, kept_spacing),
        "NSD": _nsd(ref, pred, kept_spacing, tolerance_mm),
    }


def load_surface_metric_libraries() -> None:
    """Import MONAI (and torch) now: several seconds per process, so a parent about to fork its
    case workers pays them once instead of every worker paying them again."""
    import monai.metrics  # noqa: F401


@contextmanager
def _monai_quietly() -> Iterator[None]:
    """MONAI warns about its own internal use of a deprecated argument on every call."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"monai\.")
        yield


def _one_hot_batch(mask: np.ndarray):
    """MONAI's layout: batch 1, channels (background, foreground), spatial axes."""
    import torch

    foreground = torch.from_numpy(np.ascontiguousarray(mask, dtype=bool))
    return torch.stack((~foreground, foreground))[None].float()


def _hd95(reference: np.ndarray, prediction: np.ndarray, spacing: list[float]) -> float:
    from monai.metrics import compute_hausdorff_distance

    with _monai_quietly():
        value = compute_hausdorff_distance(
            _one_hot_batch(prediction), _one_hot_batch(reference), percentile=95, spacing=spacing
        )
    return float(value.reshape(-1)[0])


def _nsd(
    reference: np.ndarray, prediction: np.ndarray, spacing: list[float], tolerance_mm: float
) -> float:
    from monai.metrics import compute_surface_dice

    with _monai_quietly():
        value = compute_surface_dice(
            _one_hot_batch(prediction),
            _one_hot_batch(reference),
            class_thresholds=[float(tolerance_mm)],
            spacing=spacing,
        )
    return float(value.reshape(-1)[0])
