"""Did the folds wait for data? Per-epoch data wait against compute, and a warning per starved fold.

The trainer records, per epoch, the seconds its training iterations were blocked waiting for the
next batch and the seconds they computed (``training.trainer.epoch_timing``). A fold that waited
more than ``WAIT_WARNING_SHARE`` of that time was limited by CPU augmentation, not by its GPU: the
warning names the settings that give augmentation more workers or cores.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
from matplotlib.ticker import MaxNLocator

from nnunet_core.report.figures import _figure, _save

WAIT_WARNING_SHARE = 0.20
FIGURE = "data_wait.png"
REMEDY = (
    "more augmentation workers (training.num_workers in the config, or nnUNet_n_proc_DA for "
    "nnunet-core train) and the CPU cores to run them (training.threads locally and, as "
    "cpus_per_task, for a SLURM job without GPUs; a SLURM GPU fold gets cpus_per_gpu, which the "
    "train rule sets to the workers + 1)"
)


def fold_wait_shares(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (model, fold) with timing records: data wait and compute seconds summed over its
    epochs and the share of waiting. Folds trained before the trainer recorded it are absent."""
    columns = ["model", "fold", "data_wait_seconds", "compute_seconds", "wait_share"]
    timed = curves.dropna(subset=["data_wait_seconds", "compute_seconds"])
    if timed.empty:
        return pd.DataFrame(columns=columns)
    sums = (
        timed.groupby(["model", "fold"], sort=True)[["data_wait_seconds", "compute_seconds"]]
        .sum()
        .reset_index()
    )
    total = sums["data_wait_seconds"] + sums["compute_seconds"]
    sums["wait_share"] = (sums["data_wait_seconds"] / total.where(total > 0)).fillna(0.0)
    return sums[columns]


def starved_fold_warnings(curves: pd.DataFrame, threshold: float = WAIT_WARNING_SHARE) -> list[str]:
    """One line per fold whose training iterations waited for data more than ``threshold``."""
    shares = fold_wait_shares(curves)
    return [
        f"{row.model} fold {row.fold} waited for data {100 * row.wait_share:.0f} % of its "
        f"training time ({row.data_wait_seconds:.1f} s of "
        f"{row.data_wait_seconds + row.compute_seconds:.1f} s; more than "
        f"{100 * threshold:.0f} %): give it {REMEDY}"
        for row in shares.itertuples(index=False)
        if row.wait_share > threshold
    ]


def data_wait_figure(curves: pd.DataFrame, target: str | os.PathLike) -> Path:
    """One panel per fold: stacked bars of compute and data wait per epoch, the share in the
    title; a panel says so when its fold has no timing records."""
    folds = list(curves.groupby(["model", "fold"], sort=True)) if not curves.empty else []
    columns = min(3, max(1, len(folds)))
    rows = max(1, math.ceil(len(folds) / columns))
    figure = _figure(4.5 * columns, 3.0 * rows + 0.6)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    shares = fold_wait_shares(curves).set_index(["model", "fold"])["wait_share"]
    for ax, ((model, fold), frame) in zip(axes, folds, strict=False):
        timed = frame.dropna(subset=["data_wait_seconds", "compute_seconds"])
        ax.set_title(f"{model}\nfold {fold}", fontsize=8)
        if timed.empty:
            ax.text(0.5, 0.5, "no data-wait records", ha="center", va="center")
            ax.set_axis_off()
            continue
        epochs = timed["epoch"].to_numpy()
        compute = timed["compute_seconds"].to_numpy()
        ax.bar(epochs, compute, color="tab:green", label="compute")
        ax.bar(
            epochs, timed["data_wait_seconds"], bottom=compute, color="tab:red", label="data wait"
        )
        share = float(shares.get((model, fold), 0.0))
        flag = " (starved)" if share > WAIT_WARNING_SHARE else ""
        ax.set_title(f"{model}\nfold {fold}: {100 * share:.0f} % waiting{flag}", fontsize=8)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("training iterations [s]")
    for ax in axes[len(folds) :]:
        ax.set_axis_off()
    if not folds:
        axes[0].text(0.5, 0.5, "no trained fold", ha="center", va="center")
    handles = [h for ax in axes for h in ax.get_legend_handles_labels()[0]][:2]
    if handles:
        figure.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    figure.suptitle(
        f"Data wait vs compute per epoch (a fold waiting > {100 * WAIT_WARNING_SHARE:.0f} % "
        "is starved of augmented batches)",
        fontsize=10,
    )
    return _save(figure, target)


def data_wait_section(curves: pd.DataFrame) -> list[str]:
    """``report.md``'s lines: the figure, then each starved fold's warning (or that none was)."""
    lines = ["", "## Data loading", "", f"![Data wait vs compute]({FIGURE})", ""]
    warnings = starved_fold_warnings(curves)
    if warnings:
        lines += [f"- **Warning:** {w}" for w in warnings]
    elif fold_wait_shares(curves).empty:
        lines.append("No fold recorded its data wait (trained before it was recorded).")
    else:
        lines.append(
            f"No fold waited for data more than {100 * WAIT_WARNING_SHARE:.0f} % of its "
            "training time."
        )
    return lines
