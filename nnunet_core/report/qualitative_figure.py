"""The drawing of one qualitative example: the case's slice under its reference labels (left)
and under the predicted labels (right), titled with the rank, the case and its Dice.

The two panels are ``plot-overlay-pngs``'s pictures (``visualization.comparison``): a small slice
is enlarged pixel for pixel (no smoothing), a large one reduced with antialiasing (so a thin
label does not drop out between sampled rows); the legend below names each class's colour.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from matplotlib.patches import Patch

from nnunet_core.report.figures import DPI, _figure, _legend_below, _save
from nnunet_core.visualization.comparison import Comparison
from nnunet_core.visualization.overlay import colour_of

PANEL_INCHES = 3.6  # width of each panel; its height follows the slice's shape


def _class_line(class_dice: dict[str, float], names: dict[str, str]) -> str:
    """``a 0.9123, b none in either`` (classes in the dataset's order; ``none in either``: the
    class is in neither the reference nor the prediction, which upstream scores NaN)."""
    keys = [k for k in names if k in class_dice] + [k for k in class_dice if k not in names]
    values = {k: "none in either" if math.isnan(d) else f"{d:.4f}" for k, d in class_dice.items()}
    return ", ".join(f"{names.get(k, k)} {values[k]}" for k in keys)


def _legend(names: dict[str, str]) -> list[Patch]:
    """A patch per label class in its overlay colour (regions are drawn in their labels')."""
    handles = []
    for key, name in names.items():
        if key.lstrip("-").isdigit():
            colour = np.array(colour_of(int(key)), dtype=float) / 255
            handles.append(Patch(color=colour, label=name))
    return handles


def example_figure(
    comparison: Comparison,
    title: str,
    class_dice: dict[str, float],
    names: dict[str, str],
    target: str | os.PathLike,
) -> Path:
    """Write the example's PNG (and print versions, as every report figure)."""
    height, width = comparison.reference_rgb.shape[:2]
    panel_height = PANEL_INCHES * min(max(height / width, 0.4), 2.0)
    figure = _figure(2 * PANEL_INCHES + 0.4, panel_height + 1.5)
    axes = figure.subplots(1, 2)
    interpolation = "nearest" if max(height, width) <= PANEL_INCHES * DPI else "antialiased"
    for ax, rgb, label in zip(
        axes, (comparison.reference_rgb, comparison.prediction_rgb), ("reference", "prediction"),
        strict=True,
    ):  # fmt: skip
        ax.imshow(rgb, interpolation=interpolation)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(label, fontsize=10)
    lines = [title]
    if len(class_dice) > 1:
        lines.append("Dice per class: " + _class_line(class_dice, names))
    lines.append(f"slice {comparison.slice_index} (of 0 to {comparison.slices - 1})")
    figure.suptitle("\n".join(lines), fontsize=10)
    handles = _legend(names)
    if handles:
        _legend_below(figure, handles)
    return _save(figure, target)
