"""The report's bar figures are readable at any value: every bar has a value label that shows
(inside a bar only where the bar holds it, otherwise in black within the axes), and no label
covers a case or fold point. Checked on the real matplotlib figures, by their drawn extents.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from nnunet_core.report import figures

NAMES = ["liver", "lesion", "vessel"]


def drawn(figure):
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    ax = figure.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    return ax, renderer, bars


def check_every_bar_is_labelled(figure, values: list[float]) -> None:
    ax, renderer, bars = drawn(figure)
    axes_box = ax.get_window_extent(renderer)
    assert len(bars) == len(values)
    for bar, value in zip(bars, values, strict=True):
        centre = bar.get_x() + bar.get_width() / 2
        text = "NaN" if math.isnan(value) else f"{value:.4f}"
        labels = [
            t for t in ax.texts if t.get_text() == text and abs(t.get_position()[0] - centre) < 1e-9
        ]
        assert len(labels) == 1, (value, [t.get_text() for t in ax.texts])
        box = labels[0].get_window_extent(renderer)
        assert axes_box.y0 <= box.y0 and box.y1 <= axes_box.y1 + 0.5, (value, box, axes_box)
        if to_rgba(labels[0].get_color()) == to_rgba("white"):  # white: only on its own bar
            bar_box = bar.get_window_extent(renderer)
            assert bar_box.y0 <= box.y0 and box.y1 <= bar_box.y1, (value, box, bar_box)


def check_no_label_covers_a_point(figure) -> int:
    ax, renderer, _bars = drawn(figure)
    points = figures._point_boxes(ax, renderer)  # noqa: SLF001 - the figures' own geometry
    assert points
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        for x, y, r in points:  # the point's circle against the label's box
            dx = max(box.x0 - x, 0, x - box.x1)
            dy = max(box.y0 - y, 0, y - box.y1)
            assert math.hypot(dx, dy) >= r, (text.get_text(), (x, y, r), box)
    return len(points)


@pytest.mark.parametrize("dice", [[0.0, 0.012, math.nan], [0.97, 0.99, 1.0], [0.4, 0.03, 0.85]])
def test_test_dice_labels_every_bar_clear_of_the_case_points(dice) -> None:
    test = pd.DataFrame({"label_key": ["1", "2", "3"], "name": NAMES, "dice": dice})
    rng = np.random.default_rng(1)
    rows = []
    for name, value in zip(NAMES, dice, strict=True):
        centre = 0.5 if math.isnan(value) else value
        for case in range(12):  # points around the mean, some right at its label
            rows.append(
                {
                    "case": f"c{case}",
                    "name": name,
                    "dice": float(np.clip(centre + rng.normal(0, 0.02), 0, 1)),
                }
            )
    cases = pd.DataFrame(rows)
    reference = pd.DataFrame({"name": NAMES, "after": [0.0, 0.5, 1.0]})
    figure = figures.test_dice_figure(test, cases, reference, "3d_fullres")
    check_every_bar_is_labelled(figure, [0.0, 0.5, 1.0, *dice])
    assert check_no_label_covers_a_point(figure) == len(rows)


def test_test_dice_without_cross_validation_puts_labels_above_the_points() -> None:
    """One series: the case points sit right over the bar's own label."""
    test = pd.DataFrame({"label_key": ["1", "2"], "name": NAMES[:2], "dice": [0.9, 0.02]})
    cases = pd.DataFrame(
        {"case": ["a", "b", "a", "b"], "name": [NAMES[0]] * 2 + [NAMES[1]] * 2,
         "dice": [0.9, 0.905, 0.02, 0.025]}
    )  # fmt: skip
    figure = figures.test_dice_figure(test, cases, None, "2d")
    check_every_bar_is_labelled(figure, [0.9, 0.02])
    check_no_label_covers_a_point(figure)


def test_cv_dice_labels_short_bars_in_black_above_their_fold_points() -> None:
    candidates = pd.DataFrame(
        {
            "identifier": ["a", "b", "c", "d"],
            "label": ["3d_fullres", "2d", "3d_fullres + 2d", "3d_lowres"],
            "kind": ["single", "single", "ensemble", "single"],
            "selected": [True, False, False, False],
            "cv_foreground_dice": [0.91, 0.01, 0.0, math.nan],
        }
    )
    folds = pd.DataFrame(
        {
            "identifier": ["a"] * 5 + ["b"] * 5 + ["c"] * 5,
            "foreground_dice": [0.9, 0.92, 0.91, 0.9, 0.93, 0.0, 0.02, 0.01, 0.0, 0.02] + [0.0] * 5,
        }
    )
    figure = figures.cv_dice_figure(candidates, folds)
    check_every_bar_is_labelled(figure, [0.91, 0.01, 0.0, math.nan])
    check_no_label_covers_a_point(figure)
    ax = figure.axes[0]
    short = [t for t in ax.texts if t.get_text() in ("0.0100", "0.0000", "NaN")]
    assert short and all(to_rgba(t.get_color()) != to_rgba("white") for t in short)
