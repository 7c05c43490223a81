"""The report's figures: drawn with matplotlib's Agg canvas (no display, no pyplot state).

Each function takes the DataFrames of ``collect`` and writes one PNG, plus a PDF and an SVG of
the same drawing for print (unless ``print_figures(False)``: they are most of a report's time),
each atomically, so a killed report never leaves a torn image that ``snakemake --report`` would
embed.
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from nnunet_core.io.atomic import atomic_path
from nnunet_core.report.collect import Selection

DPI = 100
SINGLE, ENSEMBLE = "tab:blue", "tab:orange"
BEFORE, AFTER, TEST = "tab:gray", "tab:green", "tab:purple"


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


SVG_IDS = {"svg.hashsalt": "nnunet-core"}  # fixed element ids instead of random ones
# print formats beside each PNG; no dates inside, so the same figure gives the same bytes
PRINT_FORMATS = {"pdf": {"CreationDate": None}, "svg": {"Date": None}}
_PRINTING: ContextVar[bool] = ContextVar("print_figures", default=True)


@contextmanager
def print_figures(enabled: bool) -> Iterator[None]:
    """Whether the figures drawn inside also get their PDF and SVG."""
    token = _PRINTING.set(enabled)
    try:
        yield
    finally:
        _PRINTING.reset(token)


def printing() -> bool:
    return _PRINTING.get()


def print_versions(png: Path) -> list[Path]:
    """The PDF and SVG written beside a figure's PNG (none when print versions are off)."""
    return [png.with_suffix(f".{kind}") for kind in PRINT_FORMATS] if printing() else []


def _save(figure: Figure, target: str | os.PathLike) -> Path:
    """The PNG for the page, and PDF and SVG for print (vector, same drawing)."""
    target = Path(target)
    with atomic_path(target, suffix=".png") as tmp:
        figure.savefig(tmp, format="png")
    if not printing():
        return target
    # the print versions keep the PNG's layout: constrained layout, solved again for each
    # format, was a third of a report's time
    figure.set_layout_engine("none")
    for kind, metadata in PRINT_FORMATS.items():
        path = target.with_suffix(f".{kind}")
        with atomic_path(path, suffix=f".{kind}") as tmp, rc_context(SVG_IDS):
            figure.savefig(tmp, format=kind, metadata=metadata)
    return target


def _label_bars(ax, xs, heights, fmt: str = "{:.4f}") -> None:
    """Each value just above the bar's top (a bar of height ~0 still shows its number)."""
    for x, h in zip(xs, heights, strict=True):
        text = "NaN" if math.isnan(h) else fmt.format(h)
        ax.text(x, 0 if math.isnan(h) else h, text, ha="center", va="bottom", fontsize=8)


def _point_boxes(ax, renderer) -> list[tuple[float, float, float]]:
    """(x, y, radius) in pixels of every scatter point of ``ax``."""
    points = []
    for collection in ax.collections:
        offsets = collection.get_offsets()
        if len(offsets) == 0:
            continue
        sizes = collection.get_sizes()
        radius = (
            math.sqrt(float(sizes[0]) if len(sizes) else 36.0) / 2 * renderer.points_to_pixels(1)
        )
        for x, y in ax.transData.transform(np.asarray(offsets, dtype=float)):
            if np.isfinite(x) and np.isfinite(y):
                points.append((float(x), float(y), radius))
    return points


def _lift_over_points(figure: Figure, ax, texts: list, margin: float = 2.0) -> None:
    """Move each label (``va="bottom"``) that covers a scatter point above the highest point of
    its column, and raise the axis top until every label fits inside the axes."""
    for _ in range(6):
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        points = _point_boxes(ax, renderer)
        changed = False
        for text in texts:
            box = text.get_window_extent(renderer)
            column = [(y, r) for x, y, r in points if box.x0 - r <= x <= box.x1 + r]
            if any(box.y0 - r < y < box.y1 + r for y, r in column):
                bottom = max(y + r for y, r in column) + margin
                text.set_y(ax.transData.inverted().transform((box.x0, bottom))[1])
                changed = True
        tops = [t.get_window_extent(renderer).y1 for t in texts]
        axes_top = ax.get_window_extent(renderer).y1
        if tops and max(tops) > axes_top - margin:
            low, high = ax.get_ylim()
            per_pixel = (high - low) / max(ax.get_window_extent(renderer).height, 1.0)
            ax.set_ylim(low, high + (max(tops) - axes_top + 4 * margin) * per_pixel)
            changed = True
        if not changed:
            return


def _dice_axis(ax, values: np.ndarray, label: str = "Dice") -> float:
    """Zoom the y axis onto the Dice values (differences of 0.01 matter); says where it starts."""
    finite = values[np.isfinite(values)]
    lower = max(0.0, math.floor((finite.min() - 0.05) * 10) / 10) if finite.size else 0.0
    ax.set_ylim(lower, 1.0 + 0.08 * (1.0 - lower))
    ax.set_ylabel(label if lower == 0 else f"{label} (axis starts at {lower:.1f})")
    return lower


def _legend_below(figure: Figure, handles: list) -> None:
    figure.legend(
        handles=handles, loc="outside lower center", ncols=min(4, len(handles)), frameon=False
    )


def training_curves(curves: pd.DataFrame, title: str, target: str | os.PathLike) -> Path:
    """One panel per fold: train/val loss (left axis), pseudo Dice and its EMA (right axis)."""
    folds = list(dict.fromkeys(curves["fold"]))
    ncols = min(len(folds), 3)
    nrows = math.ceil(len(folds) / ncols)
    figure = _figure(5.2 * ncols, 3.6 * nrows + 0.8)
    axes = np.atleast_1d(figure.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax, fold in zip(axes, folds, strict=False):
        frame = curves[curves["fold"] == fold]
        marker = "o" if len(frame) <= 30 else None
        ax.plot(frame["epoch"], frame["train_loss"], "-", color="tab:blue", marker=marker, ms=3)
        ax.plot(frame["epoch"], frame["val_loss"], "-", color="tab:red", marker=marker, ms=3)
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        dice_ax = ax.twinx()
        dice_ax.plot(
            frame["epoch"], frame["pseudo_dice"], ":", color="tab:green", marker=marker, ms=3
        )
        dice_ax.plot(frame["epoch"], frame["ema_pseudo_dice"], "-", color="tab:green", lw=2)
        dice_ax.set_ylim(0, 1.02)
        dice_ax.set_ylabel("pseudo Dice")
        source = frame["source"].iloc[0] if "source" in frame else ""
        ax.set_title(f"fold {fold}: {len(frame)} epochs ({source})", fontsize=9)
    for ax in axes[len(folds) :]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], color="tab:blue", label="training loss"),
        Line2D([], [], color="tab:red", label="validation loss"),
        Line2D([], [], color="tab:green", ls=":", label="pseudo Dice"),
        Line2D([], [], color="tab:green", lw=2, label="pseudo Dice (EMA 0.9)"),
    ]
    _legend_below(figure, handles)
    figure.suptitle(title, fontsize=11)
    return _save(figure, target)


def cv_dice(candidates: pd.DataFrame, fold_dice: pd.DataFrame, target: str | os.PathLike) -> Path:
    """Foreground-mean CV Dice per candidate (bars) with each fold's value (points)."""
    return _save(cv_dice_figure(candidates, fold_dice), target)


def cv_dice_figure(candidates: pd.DataFrame, fold_dice: pd.DataFrame) -> Figure:
    """The drawing of :func:`cv_dice`: a value on every bar, white inside a tall bar, black above
    a short one (lifted over its fold points)."""
    figure = _figure(max(5.5, 1.3 * len(candidates) + 2.5), 5.0)
    ax = figure.subplots()
    xs = np.arange(len(candidates))
    scores = candidates["cv_foreground_dice"].astype(float).to_numpy()
    colors = [ENSEMBLE if k == "ensemble" else SINGLE for k in candidates["kind"]]
    edges = ["black" if s else "none" for s in candidates["selected"]]
    ax.bar(xs, np.nan_to_num(scores), color=colors, edgecolor=edges, linewidth=2.5, width=0.6)
    rng = np.random.default_rng(0)
    points = []
    for x, identifier in zip(xs, candidates["identifier"], strict=True):
        values = fold_dice.loc[fold_dice["identifier"] == identifier, "foreground_dice"]
        points += list(values)
        jitter = rng.uniform(-0.15, 0.15, len(values))
        ax.scatter(x + jitter, values, s=18, color="black", zorder=3)
    lower = _dice_axis(
        ax, np.concatenate([scores, np.asarray(points, float)]), "foreground-mean Dice"
    )
    above = []
    for x, score in zip(xs, scores, strict=True):
        text = "NaN" if math.isnan(score) else f"{score:.4f}"
        if np.isfinite(score) and score - lower >= 0.12 * (1 - lower):  # inside, clear of points
            y = lower + 0.03 * (1 - lower)
            ax.text(x, y, text, ha="center", va="bottom", color="white", fontsize=9, weight="bold")
        else:  # too short to hold it: above the bar, in black
            y = max(score, lower) if np.isfinite(score) else lower
            above.append(ax.text(x, y, text, ha="center", va="bottom", fontsize=9, weight="bold"))
    rotate = len(candidates) > 3
    ax.set_xticks(
        xs, candidates["label"], rotation=20 if rotate else 0, ha="right" if rotate else "center"
    )
    ax.set_title("Cross-validation Dice per configuration and ensemble", fontsize=11)
    _legend_below(
        figure,
        [
            Patch(color=SINGLE, label="single configuration"),
            Patch(color=ENSEMBLE, label="ensemble"),
            Patch(facecolor="white", edgecolor="black", linewidth=2.5, label="selected"),
            Line2D([], [], marker="o", ls="", color="black", ms=4, label="one fold"),
        ],
    )
    _lift_over_points(figure, ax, above)
    return figure


def _grouped(ax, names: list[str], series: list[tuple[str, str, np.ndarray]]) -> np.ndarray:
    """Side-by-side bars per class, one color per series; returns the group centres."""
    xs = np.arange(len(names))
    width = 0.8 / len(series)
    for i, (label, color, values) in enumerate(series):
        offset = xs + (i - (len(series) - 1) / 2) * width
        ax.bar(offset, np.nan_to_num(values), width * 0.95, color=color, label=label)
        _label_bars(ax, offset, values)
    ax.set_xticks(xs, names)
    _dice_axis(ax, np.concatenate([v for _, _, v in series]))
    return xs


def _step_line(step: dict, names: dict[str, str]) -> str:
    mark = "accepted" if step.get("accepted") else "rejected"
    fg = (
        f"foreground mean {step.get('foreground_mean_dice_before', math.nan):.4f} -> "
        f"{step.get('foreground_mean_dice_after', math.nan):.4f}"
    )
    scope = str(step.get("scope", "all foreground"))
    if scope == "all foreground":
        return f"{mark}: largest component of all foreground; {fg}"
    name = names.get(scope, scope)
    return (
        f"{mark}: largest component of {name} ({scope}); Dice "
        f"{step.get('dice_before', math.nan):.4f} -> {step.get('dice_after', math.nan):.4f}, {fg}"
    )


def selection(selection: Selection, label: str, target: str | os.PathLike) -> Path:
    """The winner's CV Dice per class before and after postprocessing, and the steps tried."""
    table = selection.before_after
    names = dict(zip(table["label_key"], table["name"], strict=True))
    lines = [_step_line(s, names) for s in selection.steps_tried] or ["no postprocessing tried"]
    figure = _figure(max(8.0, 1.4 * len(table) + 3), 4.8 + 0.2 * len(lines))
    ax, text_ax = figure.subplots(2, 1, height_ratios=[4, 0.3 + 0.22 * len(lines)])
    before = table["before"].to_numpy(float)
    after = table["after"].to_numpy(float)
    _grouped(
        ax,
        list(table["name"]),
        [("before postprocessing", BEFORE, before), ("after postprocessing", AFTER, after)],
    )
    ax.set_title(
        f"Selected: {label}\ncross-validation foreground-mean Dice {selection.dice_pre_pp:.4f} -> "
        f"{selection.dice_post_pp:.4f} ({len(selection.steps)} postprocessing step(s) accepted)",
        fontsize=10,
    )
    text_ax.axis("off")
    text_ax.text(0, 1, "\n".join(lines), va="top", ha="left", fontsize=8, family="monospace")
    _legend_below(
        figure,
        [
            Patch(color=BEFORE, label="before postprocessing"),
            Patch(color=AFTER, label="after postprocessing"),
        ],
    )
    return _save(figure, target)


def test_dice(
    test: pd.DataFrame,
    cases: pd.DataFrame | None,
    reference: pd.DataFrame | None,
    label: str,
    target: str | os.PathLike,
) -> Path:
    """Test Dice per class (bars, per-case points) next to the winner's CV Dice after pp."""
    return _save(test_dice_figure(test, cases, reference, label), target)


def test_dice_figure(
    test: pd.DataFrame, cases: pd.DataFrame | None, reference: pd.DataFrame | None, label: str
) -> Figure:
    """The drawing of :func:`test_dice`: value labels lifted over the case points they cover."""
    names = list(test["name"])
    figure = _figure(max(6.5, 1.4 * len(names) + 3), 5.0)
    ax = figure.subplots()
    series = []
    if reference is not None:
        after = dict(zip(reference["name"], reference["after"], strict=True))
        cv = np.array([after.get(n, math.nan) for n in names], dtype=float)
        series.append(("cross-validation (postprocessed)", AFTER, cv))
    series.append(("test set", TEST, test["dice"].to_numpy(float)))
    xs = _grouped(ax, names, series)
    handles = [Patch(color=c, label=n) for n, c, _ in series]
    if cases is not None and not cases.empty:
        offset = (len(series) - 1) / 2 * 0.8 / len(series)
        rng = np.random.default_rng(0)
        for x, name in zip(xs, names, strict=True):
            values = cases.loc[cases["name"] == name, "dice"].to_numpy(float)
            jitter = rng.uniform(-0.08, 0.08, len(values))
            ax.scatter(x + offset + jitter, values, s=16, color="black", zorder=3)
        _dice_axis(ax, np.concatenate([*(v for _, _, v in series), cases["dice"].to_numpy(float)]))
        handles.append(
            Line2D([], [], marker="o", ls="", color="black", ms=4, label="one test case")
        )
    ax.set_title(f"Test-set Dice of {label} (with postprocessing)", fontsize=11)
    _legend_below(figure, handles)
    _lift_over_points(figure, ax, list(ax.texts))
    return figure


def _duration_unit(seconds: float) -> tuple[float, str]:
    if seconds >= 2 * 3600:
        return 3600.0, "h"
    if seconds >= 120:
        return 60.0, "min"
    return 1.0, "s"


def run_times(times: pd.DataFrame, target: str | os.PathLike) -> Path:
    """Wall time per job (horizontal bars, in start order), colored by where it was recorded."""
    times = times.sort_values("start", kind="stable")
    scale, unit = _duration_unit(float(times["seconds"].max()))
    labels = ["\n".join(textwrap.wrap(j, 60)) for j in times["job"]]
    figure = _figure(9.0, 1.8 + 0.32 * sum(label.count("\n") + 1 for label in labels))
    ax = figure.subplots()
    ys = np.arange(len(times))[::-1]
    sources = list(dict.fromkeys(times["source"]))
    palette = dict(zip(sources, ["tab:blue", "tab:orange", "tab:green"], strict=False))
    values = times["seconds"].to_numpy(float) / scale
    ax.barh(ys, values, color=[palette[s] for s in times["source"]], height=0.7)
    for y, v in zip(ys, values, strict=True):
        ax.text(v, y, f" {v:.1f} {unit}", va="center", fontsize=8)
    ax.set_yticks(ys, labels, fontsize=8)
    ax.set_ylim(-0.6, len(times) - 0.4)
    ax.set_xlim(0, max(values.max() * 1.15, 1e-9))
    ax.set_xlabel(f"wall time [{unit}]")
    total = times["seconds"].sum() / scale
    ax.set_title(f"Run time per job, in start order ({total:.1f} {unit} summed)", fontsize=11)
    _legend_below(figure, [Patch(color=palette[s], label=f"from {s}") for s in sources])
    return _save(figure, target)
