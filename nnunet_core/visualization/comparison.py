"""A predicted case next to its reference: the same slice twice, once under each label map.

The pictures are ``plot-overlay-pngs``'s (``overlay``): its slice rule, colours and blending, so
a class has the same colour here as in those PNGs. Reading a case goes through the dataset's
reader, as training did.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nnunet_core.errors import DatasetError
from nnunet_core.io.images import read_images, read_seg
from nnunet_core.io.readers import ImageReader
from nnunet_core.visualization.overlay import DEFAULT_OVERLAY_INTENSITY, overlay_rgb, select_slice


@dataclass(frozen=True)
class Comparison:
    """One slice of a case: the image under the reference (``reference_rgb``) and under the
    prediction (``prediction_rgb``), each ``(y, x, 3)`` uint8, the slice's index and how many
    slices the case has."""

    slice_index: int
    slices: int
    reference_rgb: np.ndarray
    prediction_rgb: np.ndarray


def comparison_slice(reference: np.ndarray, prediction: np.ndarray) -> int:
    """The slice shown: the reference's (``select_slice``); where the reference has no
    foreground, the prediction's (so a false positive shows); with neither, the middle one."""
    if np.any(reference > 0):
        return select_slice(reference)
    if np.any(prediction > 0):
        return select_slice(prediction)
    return reference.shape[0] // 2


def compare(
    image: np.ndarray,
    reference: np.ndarray,
    prediction: np.ndarray,
    overlay_intensity: float = DEFAULT_OVERLAY_INTENSITY,
) -> Comparison:
    """Both overlays of the chosen slice of 3-D arrays of one shape (slices first)."""
    if not image.shape == reference.shape == prediction.shape:
        msg = (
            f"image {image.shape}, reference {reference.shape} and prediction "
            f"{prediction.shape} differ in shape"
        )
        raise DatasetError(msg)
    index = comparison_slice(reference, prediction)
    return Comparison(
        index,
        image.shape[0],
        overlay_rgb(image[index], np.maximum(reference[index], 0), overlay_intensity),
        overlay_rgb(image[index], np.maximum(prediction[index], 0), overlay_intensity),
    )


def compare_files(
    image_file: Path,
    reference_file: Path,
    prediction_file: Path,
    reader: ImageReader | None = None,
    overlay_intensity: float = DEFAULT_OVERLAY_INTENSITY,
) -> Comparison:
    """``compare`` on files: the image's first channel file, the reference and the predicted
    label maps (``reader``: the dataset's; None picks one by the file ending)."""
    image = read_images([image_file], reader)[0][0]
    reference = read_seg(reference_file, reader)[0][0]
    prediction = read_seg(prediction_file, reader)[0][0]
    try:
        return compare(image, reference, prediction, overlay_intensity)
    except DatasetError as exc:
        msg = f"{image_file.name}, {reference_file.name}, {prediction_file.name}: {exc}"
        raise DatasetError(msg) from None
