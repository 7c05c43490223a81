"""One slice of a case with its labels blended in colour (upstream's overlay PNGs).

``select_slice`` picks the slice upstream's ``nnUNetv2_plot_overlay_pngs`` picks, so our PNG of a
case shows the same slice as upstream's; ``overlay_rgb`` scales and blends as upstream does, so
the pixels agree too where every label from 0 up to the slice's largest appears in it (see
``colour_of``); ``write_png`` writes it atomically.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from nnunet_core.io.atomic import atomic_path

# Upstream's colour cycle (its overlay_plots.color_cycle, Sasha Trubetskoy's distinct colours):
# label 0 black (adds nothing: the background keeps the image's grey), then one colour a label.
COLOUR_CYCLE: tuple[str, ...] = (
    "000000",
    "4363d8",
    "f58231",
    "3cb44b",
    "e6194B",
    "911eb4",
    "ffe119",
    "bfef45",
    "42d4f4",
    "f032e6",
    "000075",
    "9A6324",
    "808000",
    "800000",
    "469990",
)
DEFAULT_OVERLAY_INTENSITY = 0.6


def hex_rgb(colour: str) -> tuple[int, int, int]:
    """``"4363d8"`` -> ``(67, 99, 216)``."""
    if len(colour) != 6:
        msg = f"expected a colour as 6 hex digits, got {colour!r}"
        raise ValueError(msg)
    red, green, blue = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return red, green, blue


def colour_of(label: int) -> tuple[int, int, int]:
    """A label's colour: label k takes the cycle's k-th colour, in every slice of every case.

    Upstream colours by rank among the labels the slice shows (a slice without label 1 shows
    label 2 in label 1's blue, so one class changes colour between PNGs) and fails past 15
    labels; here a class keeps its colour, and labels past the cycle wrap around its colours,
    never onto the background's black. The two agree on a slice that shows every label from 0
    up to its largest, and on any slice of a dataset with one foreground class.
    """
    label = int(label)
    if label <= 0:
        return hex_rgb(COLOUR_CYCLE[0])
    return hex_rgb(COLOUR_CYCLE[1 + (label - 1) % (len(COLOUR_CYCLE) - 1)])


def select_slice(segmentation: np.ndarray) -> int:
    """The index along axis 0 of the slice with the most foreground, by upstream's rule.

    Upstream (``select_slice_to_plot2``) weighs classes rather than voxels, so a small lesion
    counts as much as a large organ: for each foreground class in ascending order, its voxel count
    per slice becomes a column of a (slices x classes) table, divided by the table's total at
    that moment; the slice with the largest mean over the columns wins (the first one on a tie).
    The total includes the columns already divided, so the first class is divided by its own
    volume (its column sums to 1) and a later class by its volume plus a sum of about one per
    earlier class: close to each class's share of its volume, not exactly. We keep that division
    as it is because the point is to show the slice upstream shows. Labels below 1 (background,
    preprocessing's -1 outside the image) count for nothing; without foreground the slice is 0
    (upstream's argmax of an empty mean).
    """
    seg = np.asarray(segmentation)
    if seg.ndim != 3:
        msg = f"select_slice needs a 3-D segmentation (slices first), got shape {seg.shape}"
        raise ValueError(msg)
    classes = [int(c) for c in np.unique(seg) if c > 0]
    if not classes:
        return 0
    table = np.zeros((seg.shape[0], len(classes)), dtype=np.float64)
    for column, label in enumerate(classes):
        table[:, column] = (seg == label).sum(axis=(1, 2))
        table[:, column] /= table.sum()
    return int(np.argmax(table.mean(axis=1)))


def _scaled_to_255(values: np.ndarray) -> np.ndarray:
    """``values`` divided by their maximum, times 255 (float32 as upstream; all-zero stays 0)."""
    top = values.max()
    return values / top * 255 if top > 0 else values


def overlay_rgb(
    image: np.ndarray,
    segmentation: np.ndarray,
    overlay_intensity: float = DEFAULT_OVERLAY_INTENSITY,
) -> np.ndarray:
    """A 2-D greyscale ``image`` with ``segmentation`` (same shape) overlaid: ``(y, x, 3)`` uint8.

    As upstream's ``generate_overlay``: the image is shifted to a minimum of 0 and scaled to a
    maximum of 255 in float32, each labelled pixel gets ``overlay_intensity`` times its label's
    colour (``colour_of``) added, and the sum is scaled to a maximum of 255 again and truncated to
    uint8 (so a higher intensity gives brighter, less transparent labels and a darker image). A
    constant image is black rather than upstream's division by zero.
    """
    image = np.asarray(image)
    segmentation = np.asarray(segmentation)
    if image.ndim != 2 or image.shape != segmentation.shape:
        msg = (
            f"overlay_rgb needs a 2-D image and a segmentation of its shape, got "
            f"{image.shape} and {segmentation.shape}"
        )
        raise ValueError(msg)
    grey = image.astype(np.float32)
    grey = _scaled_to_255(grey - grey.min())
    rgb = np.repeat(grey[:, :, None], 3, axis=2)
    for label in np.unique(segmentation):
        if label > 0:
            rgb[segmentation == label] += overlay_intensity * np.array(colour_of(label))
    return _scaled_to_255(rgb).astype(np.uint8)


def write_png(path: str | os.PathLike, rgb: np.ndarray) -> Path:
    """Write an ``(y, x, 3)`` uint8 picture as PNG, atomically (matplotlib's writer, as upstream's
    ``plt.imsave``: 8-bit RGBA, opaque)."""
    from matplotlib.image import imsave  # not pyplot: no figure machinery for a file write

    path = Path(path)
    with atomic_path(path, suffix=".png", fsync=False) as tmp:
        imsave(tmp, rgb, format="png")
    return path
