"""The report's data-wait view: which folds count as starved, the figure and the page section."""

from __future__ import annotations

import math

import pandas as pd

from nnunet_core.report.bottleneck import (
    FIGURE,
    data_wait_figure,
    data_wait_section,
    fold_wait_shares,
    starved_fold_warnings,
)

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"


def curves(waits: dict[int, list[float]], compute: float = 8.0) -> pd.DataFrame:
    """Per fold its epochs' data wait (NaN: no record), each epoch computing ``compute`` s."""
    rows = [
        {
            "model": MODEL,
            "fold": fold,
            "epoch": epoch,
            "data_wait_seconds": wait,
            "compute_seconds": math.nan if math.isnan(wait) else compute,
        }
        for fold, series in waits.items()
        for epoch, wait in enumerate(series)
    ]
    return pd.DataFrame(rows)


def test_only_a_fold_waiting_more_than_a_fifth_of_its_time_warns() -> None:
    # fold 0: 1.9 of 9.9 s (19 %); fold 1: 2.2 of 10.2 s (21.6 %); fold 2: no records
    frame = curves({0: [1.0, 0.9], 1: [2.0, 0.2], 2: [math.nan, math.nan]}, compute=4.0)
    shares = fold_wait_shares(frame)
    assert list(shares["fold"]) == [0, 1]
    assert shares["wait_share"].round(3).tolist() == [round(1.9 / 9.9, 3), round(2.2 / 10.2, 3)]
    warnings = starved_fold_warnings(frame)
    assert len(warnings) == 1 and warnings[0].startswith(f"{MODEL} fold 1 waited for data 22 %")
    for setting in ("training.num_workers", "nnUNet_n_proc_DA", "training.threads"):
        assert setting in warnings[0]
    assert "cpus_per_task" in warnings[0] and "cpus_per_gpu" in warnings[0]


def test_the_section_says_which_case_it_is() -> None:
    starved = "\n".join(data_wait_section(curves({0: [5.0]})))
    assert f"![Data wait vs compute]({FIGURE})" in starved and "**Warning:**" in starved
    fine = "\n".join(data_wait_section(curves({0: [0.1]})))
    assert "No fold waited for data more than 20 %" in fine and "Warning" not in fine
    old = "\n".join(data_wait_section(curves({0: [math.nan]})))
    assert "No fold recorded its data wait" in old


def test_the_figure_has_a_panel_per_fold_and_print_versions(tmp_path) -> None:
    frame = curves({0: [0.5, 0.4, 0.3], 1: [6.0, 5.0, 7.0], 2: [math.nan] * 3, 3: [0.1] * 3})
    target = data_wait_figure(frame, tmp_path / FIGURE)
    assert target.stat().st_size > 15_000
    assert target.with_suffix(".pdf").read_bytes().startswith(b"%PDF-")
    svg = target.with_suffix(".svg").read_text()
    assert "no data-wait records" in svg and "(starved)" in svg
    assert svg.count("(starved)") == 1
