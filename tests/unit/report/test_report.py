"""The results report on a fake results tree: real selection, real checkpoint/provenance formats."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nnunet_core import cli
from nnunet_core.evaluation.metrics import compute_metrics_on_folder
from nnunet_core.evaluation.selection import find_best_configuration
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.results import DatasetDirs, TrainedModel
from nnunet_core.report import build_report
from nnunet_core.report.collect import ReportInputError, collect
from nnunet_core.report.runtimes import snakemake_log_rows
from nnunet_core.report.tables import per_class_table, to_markdown, write_csv
from tests.helpers.fake_results import SPLITS, make_tree, one_hot, raw_dir, write_raw_dataset
from tests.helpers.fake_training_records import EPOCHS, history, write_training_records
from tests.helpers.paths import REPO

CONFIGS = ("3d_fullres", "2d")
SNAKEMAKE_LOG = """\
Select jobs to execute...
[Wed Dec  2 13:16:47 2026]
localrule crossval:
    output: results/x/summary.json
    jobid: 7
    wildcards: configuration=3d_fullres
    resources: tmpdir=/tmp
[Wed Dec  2 13:16:47 2026]
localcheckpoint select:
    jobid: 8
[Wed Dec  2 13:17:05 2026]
Finished jobid: 7 (Rule: crossval)
1 of 3 steps (33%) done
[Wed Dec  2 13:19:47 2026]
Finished jobid: 8 (Rule: select)
"""


def stray_voxel(_index: int, gt: np.ndarray) -> np.ndarray:
    """Exact but for one isolated label-1 voxel (postprocessing removes it)."""
    seg = gt.copy()
    seg[5, 0, 0] = 1
    return one_hot(seg)


def misses(index: int, gt: np.ndarray) -> np.ndarray:
    """``index`` label-1 voxels missed, less confident (so ensembles follow the other member)."""
    seg = gt.copy()
    for z, y, x in np.argwhere(gt == 1)[:index]:
        seg[z, y, x] = 0
    return one_hot(seg, confidence=0.6)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetDirs, Path]:
    """Fake results for two configurations, selection run for real, a test summary, raw data."""
    root = tmp_path_factory.mktemp("report")
    dirs = make_tree(root, {"3d_fullres": stray_voxel, "2d": misses})
    write_raw_dataset(raw_dir(dirs))
    dataset_json = load_dataset_json(dirs.preprocessed / "dataset.json")
    for config in CONFIGS:
        for fold in range(len(SPLITS)):
            validation = dirs.model_dir(TrainedModel(config)) / f"fold_{fold}" / "validation"
            compute_metrics_on_folder(
                dirs.gt_dir, validation, ".nii.gz", dataset_json.label_spec,
                output_file=validation / "summary.json", chill=True,
            )  # fmt: skip
            write_training_records(dirs, config, fold)
    info = find_best_configuration(dirs, [TrainedModel(c) for c in CONFIGS])
    winner_folder = Path(info["candidates"][0]["source"]) / "postprocessed"
    test_summary = root / "test" / "summary.json"
    compute_metrics_on_folder(
        dirs.gt_dir, winner_folder, ".nii.gz", dataset_json.label_spec, output_file=test_summary
    )
    logs = root / "snakemake_logs"
    logs.mkdir()
    (logs / "2026-12-02T131641.snakemake.log").write_text(SNAKEMAKE_LOG)
    return dirs, test_summary


@pytest.fixture(scope="module")
def report(tree: tuple[DatasetDirs, Path]) -> tuple[DatasetDirs, Path, list[Path]]:
    dirs, test_summary = tree
    written = build_report(
        dirs.results, None, test_summary, test_summary.parent.parent / "snakemake_logs",
        raw_dataset_dir=raw_dir(dirs),
    )  # fmt: skip
    return dirs, test_summary, written


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def test_report_writes_every_file_with_readable_pngs(report) -> None:
    dirs, _, written = report
    folder = dirs.results / "report"
    curves = {
        "training_curves/training_curves_3d_fullres.png",
        "training_curves/training_curves_2d.png",
    }
    # every test case is exact after postprocessing: the tie goes by case name
    curves |= {"qualitative/best_case_0.png", "qualitative/median_case_2.png"}
    curves.add("qualitative/worst_case_5.png")
    expected = curves | {
        "cv_dice.png", "selection.png", "test_dice.png", "run_times.png", "data_wait.png",
        "per_class.csv",
        "per_class.md", "per_fold.csv", "summary.csv", "report.md", "results_table.csv",
        "results_table.tex", "methods.md",
    }  # fmt: skip
    expected |= {
        n.removesuffix(".png") + k for n in expected if n.endswith(".png") for k in (".pdf", ".svg")
    }
    assert {str(p.relative_to(folder)) for p in written} == expected
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert on_disk == expected
    for png in folder.rglob("*.png"):
        width, height = png_size(png)
        assert width >= 400 and height >= 300 and png.stat().st_size > 15_000, png
        assert png.with_suffix(".pdf").read_bytes().startswith(b"%PDF-")
        assert b"<svg" in png.with_suffix(".svg").read_bytes()[:2000]
    page = (folder / "report.md").read_text()
    assert "largest component kept for: a)" in page
    methods = (folder / "methods.md").read_text()
    assert methods.strip() in page and "cross-validated on 5 folds (0, 1, 2, 3 and 4)" in methods
    assert "largest connected component of a," in methods and "1 seed (0)" in methods
    for name in expected - {"report.md", "per_class.md"}:
        assert f"({name})" in page, name


def test_summary_csv_has_one_row_per_candidate_and_flags_the_winner(report) -> None:
    dirs, test_summary, _ = report
    info = json.loads((dirs.results / "inference_information.json").read_text())
    table = pd.read_csv(dirs.results / "report" / "summary.csv")
    assert list(table["name"]) == [c["identifier"] for c in info["candidates"]]
    assert list(table["kind"]) == ["single", "single", "ensemble"]
    assert table.loc[table["selected"], "name"].tolist() == [info["winner"]]
    winner = table[table["selected"]].iloc[0]
    test = json.loads(test_summary.read_text())
    assert winner["test_foreground_dice"] == pytest.approx(test["foreground_mean"]["Dice"])
    assert winner["test_dice_a"] == pytest.approx(test["mean"]["1"]["Dice"])
    post = info["best_model_or_ensemble"]["result_on_crossval_post_pp"]
    assert winner["cv_foreground_dice_postprocessed"] == pytest.approx(post)
    assert table.loc[~table["selected"], "test_foreground_dice"].isna().all()


def test_per_class_values_equal_the_summaries(report) -> None:
    dirs, test_summary, _ = report
    info = json.loads((dirs.results / "inference_information.json").read_text())
    table = pd.read_csv(dirs.results / "report" / "per_class.csv").set_index("label")
    assert list(table.index) == ["1", "2", "foreground mean"]
    assert list(table["name"]) == ["a", "b", "foreground mean"]
    for column, candidate in zip(table.columns[1:4], info["candidates"], strict=True):
        summary = json.loads((Path(candidate["source"]) / "summary.json").read_text())
        for key in ("1", "2"):
            assert table.loc[key, column] == pytest.approx(summary["mean"][key]["Dice"])
        assert table.loc["foreground mean", column] == pytest.approx(
            summary["foreground_mean"]["Dice"]
        )
    test = json.loads(test_summary.read_text())
    assert table.loc["1", "selected, test set"] == pytest.approx(test["mean"]["1"]["Dice"])
    after = info["postprocessing"]["mean_dice_after"]
    assert table.loc["1", "selected, postprocessed (CV)"] == pytest.approx(after["1"])
    per_fold = pd.read_csv(dirs.results / "report" / "per_fold.csv")
    fold_summary = dirs.model_dir(TrainedModel("2d")) / "fold_3" / "validation" / "summary.json"
    row = per_fold[(per_fold["model"].str.endswith("__2d")) & (per_fold["fold"] == 3)].iloc[0]
    assert row["a"] == pytest.approx(json.loads(fold_summary.read_text())["mean"]["1"]["Dice"])


def test_collected_curves_per_fold_points_and_run_times(tree) -> None:
    dirs, test_summary = tree
    data = collect(dirs.results, test_summary, test_summary.parent.parent / "snakemake_logs")
    curves = data.curves[data.curves["configuration"] == "3d_fullres"]
    fold1 = curves[curves["fold"] == "1"]
    assert fold1["source"].unique().tolist() == ["checkpoint_final.pth"]
    assert fold1["train_loss"].tolist() == pytest.approx(history(1).values["train_losses"])
    assert fold1["ema_pseudo_dice"].tolist() == pytest.approx(history(1).values["ema_fg_dice"])
    assert fold1["epoch_seconds"].tolist() == pytest.approx([8.0] * EPOCHS)
    from_log = data.curves[(data.curves["configuration"] == "2d") & (data.curves["fold"] == "4")]
    assert from_log["train_loss"].tolist() == pytest.approx([0.0, -0.2])
    assert from_log["pseudo_dice"].tolist() == pytest.approx([0.6, 0.6])
    assert from_log["epoch_seconds"].tolist() == pytest.approx([3.5, 3.5])
    # per-fold points: exact except the stray voxel -> fold 0 (two cases) like the others
    winner_points = data.cv_fold_dice[data.cv_fold_dice["identifier"].str.endswith("3d_fullres")]
    assert sorted(winner_points["fold"]) == ["0", "1", "2", "3", "4"]
    assert winner_points["foreground_dice"].to_numpy() == pytest.approx((2 * 48 / 97 + 1) / 2)
    training = data.run_times[data.run_times["source"] == "provenance.json"]
    assert len(training) == 2 * len(SPLITS) + 2  # fold 0 of each configuration: two attempts
    assert set(training["seconds"]) == {210.0}
    jobs = data.run_times[data.run_times["source"] == "snakemake log"]
    assert dict(zip(jobs["stage"], jobs["seconds"], strict=True)) == {
        "crossval": 18.0,
        "select": 180.0,
    }


def test_snakemake_log_parser_reads_wildcards(tmp_path: Path) -> None:
    log = tmp_path / "x.snakemake.log"
    log.write_text(SNAKEMAKE_LOG)
    rows = snakemake_log_rows(log)
    assert [r["job"] for r in rows] == ["crossval [configuration=3d_fullres]", "select"]


def test_optional_inputs_are_skipped_with_notes_and_stale_files_removed(tree, tmp_path) -> None:
    dirs, _ = tree
    output = tmp_path / "report"
    output.mkdir()
    (output / "test_dice.png").write_bytes(b"old")
    written = build_report(dirs.results, output)
    names = {p.name for p in written}
    assert "test_dice.png" not in names and not (output / "test_dice.png").exists()
    page = (output / "report.md").read_text()
    assert "no test-set summary given" in page
    assert "- no raw folder (--raw or nnUNet_raw): qualitative examples skipped" in page
    assert "## Qualitative examples" not in page and not any((output / "qualitative").iterdir())
    summary = pd.read_csv(output / "summary.csv")
    assert "test_foreground_dice" not in summary.columns


def test_missing_inference_information_is_a_one_line_error(tree, tmp_path, capsys) -> None:
    dirs, _ = tree
    empty = tmp_path / "results" / "Dataset901_Fake"
    empty.mkdir(parents=True)
    with pytest.raises(
        ReportInputError,
        match=r"inference_information.json not found.*find-best-config -d Dataset901_Fake",
    ):
        build_report(empty, tmp_path / "out")
    code = cli.main(["report", "-d", "Dataset901_Fake", "--results", str(empty.parent)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "find-best-config" in err
    missing = tmp_path / "nowhere.json"
    with pytest.raises(ReportInputError, match=r"nowhere.json not found.*nnunet-core evaluate"):
        collect(dirs.results, missing)


def test_every_caption_is_valid_restructured_text() -> None:
    from docutils.core import publish_doctree

    folder = REPO / "workflow" / "report"
    names = {p.stem for p in folder.glob("*.rst")}
    assert {"workflow", "training_curves", "cv_dice", "per_class", "selection", "test_dice",
            "run_times", "summary"} <= names  # fmt: skip
    for rst in folder.glob("*.rst"):
        publish_doctree(rst.read_text(), settings_overrides={"halt_level": 2, "report_level": 5})


def test_nan_class_is_empty_in_csv_and_dash_in_markdown(tree, tmp_path) -> None:
    dirs, _ = tree
    data = collect(dirs.results)
    data.cv_dice.loc[data.cv_dice["label_key"] == "2", "dice"] = math.nan
    table = per_class_table(data)
    write_csv(table, tmp_path / "per_class.csv")
    read_back = pd.read_csv(tmp_path / "per_class.csv").set_index("label")
    assert read_back.loc["2"].iloc[1:4].isna().all()
    assert "| 2 | b | - | - | - |" in to_markdown(table)


CASCADE_CONFIGS = ("3d_fullres", "3d_lowres", "3d_cascade_fullres")


@pytest.fixture(scope="module")
def cascade_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[DatasetDirs, dict]:
    """Fake results for 3d_fullres, 3d_lowres and the cascade (plans as the planner writes them),
    selection over every configuration and pair run for real, then the report."""
    root = tmp_path_factory.mktemp("cascade_report")
    predictors = {"3d_fullres": stray_voxel, "3d_lowres": misses, "3d_cascade_fullres": one_hot_gt}
    dirs = make_tree(root, predictors)
    plans = json.loads((dirs.preprocessed / "nnUNetPlans.json").read_text())
    plans["configurations"]["3d_lowres"]["next_stage"] = "3d_cascade_fullres"
    plans["configurations"]["3d_cascade_fullres"] = {
        "inherits_from": "3d_fullres",
        "previous_stage": "3d_lowres",
    }
    for path in [dirs.preprocessed / "nnUNetPlans.json"] + [
        dirs.model_dir(TrainedModel(c)) / "plans.json" for c in CASCADE_CONFIGS
    ]:
        path.write_text(json.dumps(plans))
    dataset_json = load_dataset_json(dirs.preprocessed / "dataset.json")
    for config in CASCADE_CONFIGS:
        for fold in range(len(SPLITS)):
            validation = dirs.model_dir(TrainedModel(config)) / f"fold_{fold}" / "validation"
            compute_metrics_on_folder(
                dirs.gt_dir, validation, ".nii.gz", dataset_json.label_spec,
                output_file=validation / "summary.json", chill=True,
            )  # fmt: skip
            write_training_records(dirs, config, fold)
    info = find_best_configuration(dirs, [TrainedModel(c) for c in CASCADE_CONFIGS])
    build_report(dirs.results)
    return dirs, info


def one_hot_gt(_index: int, gt: np.ndarray) -> np.ndarray:
    return one_hot(gt, confidence=0.7)


def test_report_shows_the_cascade_like_any_configuration(cascade_report) -> None:
    """3d_lowres and 3d_cascade_fullres: CV bars and table rows (singles and every pair), the
    per-class columns, training curves and the selection (the exact cascade wins)."""
    dirs, info = cascade_report
    data = collect(dirs.results)
    pairs = ["3d_fullres + 3d_lowres", "3d_fullres + 3d_cascade_fullres"]
    pairs.append("3d_lowres + 3d_cascade_fullres")
    assert list(data.candidates["label"]) == [*CASCADE_CONFIGS, *pairs]
    bars = data.candidates.set_index("label")["cv_foreground_dice"]
    assert bars["3d_cascade_fullres"] == pytest.approx(1.0)
    assert bars["3d_lowres"] < bars["3d_fullres"] < 1.0
    assert set(data.cv_fold_dice["identifier"]) == set(data.candidates["identifier"])
    assert info["winner"] == "nnUNetTrainer__nnUNetPlans__3d_cascade_fullres"
    assert data.candidates.set_index("label")["selected"].to_dict() == {
        label: label == "3d_cascade_fullres" for label in [*CASCADE_CONFIGS, *pairs]
    }
    folder = dirs.results / "report"
    table = pd.read_csv(folder / "summary.csv")
    assert list(table["name"]) == [c["identifier"] for c in info["candidates"]]
    assert table.loc[table["selected"], "name"].tolist() == [info["winner"]]
    assert {"3d_lowres", "3d_cascade_fullres"} <= set(pd.read_csv(folder / "per_class.csv"))
    assert set(data.curves["configuration"]) == set(CASCADE_CONFIGS)
    for config in CASCADE_CONFIGS:
        assert (folder / "training_curves" / f"training_curves_{config}.png").is_file()


def test_print_versions_are_the_same_bytes_when_rebuilt(report, tmp_path: Path) -> None:
    """The module's report rebuilt elsewhere from the same inputs (one build, not two)."""
    dirs, test_summary, written = report
    first = dirs.results / "report"
    build_report(
        dirs.results, tmp_path, test_summary, test_summary.parent.parent / "snakemake_logs",
        raw_dataset_dir=raw_dir(dirs),
    )  # fmt: skip
    vectors = [p for p in written if p.suffix in (".pdf", ".svg")]
    assert len(vectors) >= 12 and any(p.parent.name == "qualitative" for p in vectors)
    for path in vectors:
        twin = tmp_path / path.relative_to(first)
        assert path.read_bytes() == twin.read_bytes(), path.name


def test_the_workflows_test_set_note_replaces_the_guess(tree, tmp_path: Path) -> None:
    """The report rule passes why there is no test Dice (issue 36); the report's notes say it.
    Without a test summary the qualitative examples are the selected model's cross-validation
    cases, from its postprocessed cross-validation (the stray voxels removed: all exact)."""
    note = "no test images: test prediction and evaluation skipped (/raw/D/imagesTs is empty)"
    out, results = tmp_path / "report", str(tree[0].results.parent)
    raw = str(raw_dir(tree[0]).parent)
    args = ["report", "-d", "Dataset901_Fake", "--results", results, "--raw", raw, "-o", str(out)]
    assert cli.main([*args, "--test-set-note", note, "--no-print-figures"]) == 0
    page = (out / "report.md").read_text()
    assert f"- {note}" in page.splitlines() and "no test labels?" not in page
    section = page[page.index("## Qualitative examples") :].split("\n## ")[0]
    assert "cross-validation cases by foreground-mean Dice, since there is no labelled" in section
    link = section.split("every case's Dice is in [summary.json](")[1].split(")")[0]
    crossval = tree[0].model_dir(TrainedModel("3d_fullres")) / "crossval_results_folds_0_1_2_3_4"
    assert (out / link).resolve() == crossval / "postprocessed" / "summary.json"
    assert "the selected model with its postprocessing" in section
    examples = ["best_case_0.png", "median_case_2.png", "worst_case_5.png"]  # all exact: a tie
    assert sorted(p.name for p in (out / "qualitative").iterdir()) == examples
    assert all(f"](qualitative/{name})" in section for name in examples)
    assert "### Median: case_2 (Dice 1.0000)" in section.splitlines()
