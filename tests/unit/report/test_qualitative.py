"""The report's qualitative examples: which cases (best, median, worst by foreground-mean Dice,
ties, fewer than three cases), from which summary (test set, else the selected model's
cross-validation), the pictures (plot-overlay-pngs's overlays of one slice) and the notes when
they cannot be drawn. The pages of real report builds are checked in test_report.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.errors import DatasetError
from nnunet_core.report.qualitative import (
    CROSS_VALIDATION,
    TEST_SET,
    ExampleSource,
    example_source,
    write_examples,
)
from nnunet_core.report.qualitative_cases import (
    ScoredCase,
    foreground_dice,
    pick_examples,
    png_name,
    scored_cases,
)
from nnunet_core.report.summaries import ReportInputError
from nnunet_core.visualization.comparison import compare
from nnunet_core.visualization.overlay import overlay_rgb, select_slice


def case(name: str, dice: float) -> ScoredCase:
    return ScoredCase(name, dice, {"1": dice}, Path(f"{name}.nii.gz"), Path(f"ref/{name}.nii.gz"))


def picked(*cases: ScoredCase) -> list[tuple[str, str]]:
    return [(e.rank, e.case.case) for e in pick_examples(list(cases))]


def test_best_median_and_worst_by_dice_whatever_the_order() -> None:
    cases = [case("c", 0.5), case("a", 0.9), case("e", 0.1), case("b", 0.7), case("d", 0.3)]
    assert picked(*cases) == [("best", "a"), ("median", "c"), ("worst", "e")]


def test_of_an_even_count_the_median_is_the_better_middle_case() -> None:
    cases = [case("a", 0.9), case("b", 0.7), case("c", 0.5), case("d", 0.3)]
    assert picked(*cases) == [("best", "a"), ("median", "b"), ("worst", "d")]


def test_ties_go_by_case_name_best_first_worst_last() -> None:
    cases = [case("d", 1.0), case("b", 1.0), case("c", 0.5), case("a", 1.0), case("e", 0.5)]
    assert picked(*cases) == [("best", "a"), ("median", "d"), ("worst", "e")]


def test_fewer_than_three_cases() -> None:
    assert picked(case("a", 0.2), case("b", 0.8)) == [("best", "b"), ("worst", "a")]
    assert picked(case("a", 0.2)) == [("only", "a")]
    assert picked() == []


def test_a_case_without_a_dice_is_not_ranked() -> None:
    cases = [case("a", math.nan), case("b", 0.4), case("c", 0.6), case("d", 0.5)]
    assert picked(*cases) == [("best", "c"), ("median", "d"), ("worst", "b")]
    assert picked(case("a", math.nan)) == []


def test_foreground_dice_leaves_out_background_and_classes_in_neither_file() -> None:
    metrics = {"0": {"Dice": 0.99}, "1": {"Dice": 0.8}, "2": {"Dice": math.nan}}
    metrics["(1, 2)"] = {"Dice": 0.6}
    dice, per_class = foreground_dice(metrics)
    assert dice == pytest.approx(0.7) and list(per_class) == ["1", "2", "(1, 2)"]
    assert math.isnan(foreground_dice({"1": {"Dice": math.nan}})[0])


def write_summary(path: Path, entries: list[tuple[str, Path, Path, float]]) -> Path:
    metric_per_case = [
        {
            "metrics": {"1": {"Dice": dice}},
            "prediction_file": str(prediction),
            "reference_file": str(reference),
        }
        for _, prediction, reference, dice in entries
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"metric_per_case": metric_per_case}))
    return path


def test_a_postprocessed_summary_shows_the_postprocessed_files(tmp_path: Path) -> None:
    """find-best-config's postprocessed summary names the files it was computed from (the
    crossval folder's, or a step folder it removed): the picture is of the file beside it."""
    crossval = tmp_path / "crossval"
    (crossval / "postprocessed").mkdir(parents=True)
    (crossval / "postprocessed" / "x.nii.gz").write_bytes(b"")
    summary = write_summary(
        crossval / "postprocessed" / "summary.json",
        [
            ("x", crossval / "x.nii.gz", tmp_path / "gt" / "x.nii.gz", 0.5),
            ("y", crossval / "temp" / "step_0" / "y.nii.gz", tmp_path / "gt" / "y.nii.gz", 0.7),
        ],
    )
    cases = scored_cases(summary, ".nii.gz")
    assert [c.case for c in cases] == ["x", "y"]
    assert cases[0].prediction == crossval / "postprocessed" / "x.nii.gz"
    assert cases[1].prediction == crossval / "temp" / "step_0" / "y.nii.gz"  # none beside it
    assert cases[0].reference == tmp_path / "gt" / "x.nii.gz"
    assert png_name(pick_examples(cases)[0]) == "best_y.png"


def test_a_file_that_is_no_evaluation_summary_is_named(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"mean": {}}))
    with pytest.raises(ReportInputError, match=r"summary.json: no 'metric_per_case' list"):
        scored_cases(path, ".nii.gz")


def test_the_test_set_first_else_the_postprocessed_cross_validation(tmp_path: Path) -> None:
    test, cv = tmp_path / "test_summary.json", tmp_path / "crossval" / "summary.json"
    assert example_source(test, cv) == ExampleSource(TEST_SET, test)
    assert example_source(None, None) is None
    assert example_source(None, cv) is None  # not written
    write_summary(cv, [])
    assert example_source(None, cv) == ExampleSource(CROSS_VALIDATION, cv)
    assert not example_source(None, cv).postprocessed
    postprocessed = write_summary(cv.parent / "postprocessed" / "summary.json", [])
    assert example_source(None, cv) == ExampleSource(CROSS_VALIDATION, postprocessed)
    assert example_source(None, cv).postprocessed and example_source(test, None).postprocessed


def volumes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    image = np.arange(4 * 6 * 6, dtype=np.float32).reshape(4, 6, 6)
    reference = np.zeros((4, 6, 6), dtype=np.uint8)
    reference[1, 1:3, 1:3] = 1
    reference[2, 1:5, 1:5] = 1  # slice 2 has the most foreground of both classes
    reference[2, 5, 5] = 2
    prediction = np.zeros_like(reference)
    prediction[3, 0:2, 0:2] = 1  # a false positive elsewhere
    return image, reference, prediction


def test_both_panels_show_the_references_slice_as_plot_overlay_pngs_draws_it() -> None:
    image, reference, prediction = volumes()
    shown = compare(image, reference, prediction)
    assert shown.slice_index == select_slice(reference) == 2 and shown.slices == 4
    assert (shown.reference_rgb == overlay_rgb(image[2], reference[2])).all()
    assert (shown.prediction_rgb == overlay_rgb(image[2], prediction[2])).all()
    assert not (shown.reference_rgb == shown.prediction_rgb).all()


def test_without_reference_foreground_the_predictions_slice_else_the_middle() -> None:
    image, _, prediction = volumes()
    empty = np.zeros_like(prediction)
    assert compare(image, empty, prediction).slice_index == 3  # the false positive shows
    assert compare(image, empty, empty).slice_index == 2
    with pytest.raises(DatasetError, match=r"differ in shape"):
        compare(image, empty[:3], empty)


def test_what_cannot_be_drawn_is_a_note_not_a_failure(tmp_path: Path) -> None:
    out, notes = tmp_path / "report", []
    assert write_examples(out, tmp_path / "raw", None, {}, notes) == ([], [])
    assert notes[-1] == "no test or cross-validation summary: qualitative examples skipped"
    summary = write_summary(
        tmp_path / "test_summary.json",
        [("a", tmp_path / "a.nii.gz", tmp_path / "gt" / "a.nii.gz", 0.5)],
    )
    source = ExampleSource(TEST_SET, summary)
    assert write_examples(out, None, source, {}, notes) == ([], [])
    assert notes[-1] == "no raw folder (--raw or nnUNet_raw): qualitative examples skipped"
    raw = tmp_path / "raw"
    raw.mkdir()
    dataset = {"channel_names": {"0": "CT"}, "labels": {"background": 0, "a": 1}}
    dataset |= {"numTraining": 0, "file_ending": ".nii.gz"}
    (raw / "dataset.json").write_text(json.dumps(dataset))
    (raw / "imagesTs").mkdir()
    (raw / "imagesTs" / "b_0000.nii.gz").write_bytes(b"")  # another case only
    assert write_examples(out, raw, source, {}, notes) == ([], [])
    assert notes[-1] == f"qualitative examples skipped: case a: no image in {raw / 'imagesTs'}"
    assert (out / "qualitative").is_dir() and not any((out / "qualitative").iterdir())
