"""Cross-validation merging and model selection on a fake results tree (no training needed)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.crossval import accumulate_crossval, crossval_summary_file
from nnunet_core.evaluation.selection import (
    Candidate,
    find_best_configuration,
    predict_command,
    select_best,
)
from nnunet_core.layout.results import DatasetDirs, TrainedModel, crossval_dir
from tests.helpers.fake_results import CASES, LABEL1_VOXELS, dice, exact, make_tree, one_hot


def noisy(index: int, gt: np.ndarray) -> np.ndarray:
    """``index`` label-1 voxels missed (FN) and ``index % 3`` label-2 voxels added (FP)."""
    seg = gt.copy()
    for z, y, x in np.argwhere(gt == 1)[:index]:
        seg[z, y, x] = 0
    for k in range(index % 3):
        seg[5, 9, 9 - k] = 2
    return one_hot(seg)


def test_crossval_summary_equals_hand_computed_dice(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"3d_fullres": noisy})
    summary = accumulate_crossval(dirs, TrainedModel("3d_fullres"))
    dice1 = [dice(LABEL1_VOXELS - i, 0, i) for i in range(6)]
    dice2 = [dice(18, i % 3, 0) for i in range(6)]
    assert summary["mean"][1]["Dice"] == pytest.approx(np.mean(dice1))
    assert summary["mean"][2]["Dice"] == pytest.approx(np.mean(dice2))
    assert summary["foreground_mean"]["Dice"] == pytest.approx(
        (np.mean(dice1) + np.mean(dice2)) / 2
    )
    folder = crossval_dir(dirs.model_dir(TrainedModel("3d_fullres")), (0, 1, 2, 3, 4))
    assert sorted(p.name for p in folder.glob("*.nii.gz")) == [f"{c}.nii.gz" for c in CASES]
    on_disk = json.loads((folder / "summary.json").read_text())
    assert len(on_disk["metric_per_case"]) == 6 and (folder / "dataset.json").is_file()


def test_crossval_names_fold_case_and_command_for_missing_prediction(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"3d_fullres": exact})
    (dirs.model_dir(TrainedModel("3d_fullres")) / "fold_0/validation/case_1.nii.gz").unlink()
    with pytest.raises(
        DatasetError,
        match=(
            r"fold 0: no validation prediction for case case_1.*nnunet-core train Dataset901_Fake "
            r"3d_fullres 0 --val"
        ),
    ):
        accumulate_crossval(dirs, TrainedModel("3d_fullres"))


def test_crossval_refuses_unfinished_validation(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact})
    (dirs.model_dir(TrainedModel("2d")) / "fold_3/validation/summary.json").unlink()
    with pytest.raises(
        DatasetError, match=r"2d fold 3: validation unfinished.*train Dataset901_Fake 2d 3 --val"
    ):
        accumulate_crossval(dirs, TrainedModel("2d"))


def _candidate(identifier: str, score: float, members: int = 1) -> Candidate:
    models = tuple(TrainedModel(f"c{i}") for i in range(members))
    return Candidate(identifier, models, Path("/nowhere/summary.json"), score, {})


def test_select_best_takes_the_maximum_and_breaks_ties_towards_the_earlier() -> None:
    singles = [_candidate("A", 0.80), _candidate("B", 0.85)]
    assert select_best([*singles, _candidate("ens", 0.84, 2)]).identifier == "B"
    assert select_best([*singles, _candidate("ens", 0.85, 2)]).identifier == "B"
    assert select_best([*singles, _candidate("ens", 0.851, 2)]).identifier == "ens"


def test_select_best_ranks_nan_below_numbers() -> None:
    nan = math.nan
    assert select_best([_candidate("A", nan), _candidate("B", 0.1)]).identifier == "B"
    assert select_best([_candidate("A", 0.1), _candidate("B", nan)]).identifier == "A"
    assert select_best([_candidate("A", nan), _candidate("B", nan)]).identifier == "A"


def test_find_best_picks_the_better_single_configuration(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": noisy, "3d_fullres": exact})
    models = [TrainedModel("2d"), TrainedModel("3d_fullres")]
    info = find_best_configuration(dirs, models)
    assert info["winner"] == "nnUNetTrainer__nnUNetPlans__3d_fullres"
    assert list(info["all_results"]) == [
        "nnUNetTrainer__nnUNetPlans__2d",
        "nnUNetTrainer__nnUNetPlans__3d_fullres",
        "ensemble___nnUNetTrainer__nnUNetPlans__2d___nnUNetTrainer__nnUNetPlans__3d_fullres___0_1_2_3_4",
    ]
    assert info["all_results"]["nnUNetTrainer__nnUNetPlans__3d_fullres"] == 1.0
    written = json.loads((dirs.results / "inference_information.json").read_text())
    assert written["best_model_or_ensemble"]["selected_model_or_models"] == [
        {
            "configuration": "3d_fullres",
            "trainer": "nnUNetTrainer",
            "plans_identifier": "nnUNetPlans",
        }
    ]
    assert written["postprocessing"]["steps"] == []  # nothing beats a perfect prediction
    text = (dirs.results / "inference_instructions.txt").read_text()
    assert (
        "nnunet-core predict -d Dataset901_Fake -i INPUT_FOLDER -o OUTPUT_FOLDER -f 0 1 2 3 4"
        in text
    )
    assert "-c 3d_fullres" in text and "nnunet-core ensemble" not in text
    assert "nnunet-core apply-postprocessing -i OUTPUT_FOLDER" in text


def test_a_tie_goes_to_the_single_configuration(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact, "3d_fullres": exact})
    info = find_best_configuration(dirs, [TrainedModel("3d_fullres"), TrainedModel("2d")])
    assert set(info["all_results"].values()) == {1.0}
    assert info["winner"] == "nnUNetTrainer__nnUNetPlans__3d_fullres"


def _wrong_in(half: int):
    """Unsure (0.6) wrong label-1 voxels in one half of the box; confident (0.8) elsewhere."""

    def predict(_index: int, gt: np.ndarray) -> np.ndarray:
        probabilities = one_hot(gt)
        voxels = np.argwhere(gt == 1)
        for z, y, x in voxels[half::2][:4]:
            probabilities[:, z, y, x] = (0.6, 0.2, 0.2)
        return probabilities

    return predict


def test_an_ensemble_that_fixes_both_members_wins(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": _wrong_in(0), "3d_fullres": _wrong_in(1)})
    info = find_best_configuration(dirs, [TrainedModel("2d"), TrainedModel("3d_fullres")])
    assert info["winner"].startswith("ensemble___")
    assert info["best_model_or_ensemble"]["result_on_crossval_pre_pp"] == 1.0
    assert max(v for k, v in info["all_results"].items() if "ensemble" not in k) < 1.0
    assert [
        m["configuration"] for m in info["best_model_or_ensemble"]["selected_model_or_models"]
    ] == ["2d", "3d_fullres"]
    text = (dirs.results / "inference_instructions.txt").read_text()
    assert "--save_probabilities" in text
    assert (
        "nnunet-core ensemble -i OUTPUT_FOLDER_MODEL_1 OUTPUT_FOLDER_MODEL_2 -o OUTPUT_FOLDER"
        in text
    )
    assert "ensembles/ensemble___" in info["best_model_or_ensemble"]["postprocessing_file"]


def test_summaries_are_reused_until_a_fold_changes(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact})
    model = TrainedModel("2d")
    summary = crossval_summary_file(dirs, model)
    os.utime(summary, (1e9 + 100, 1e9 + 100))
    for path in dirs.model_dir(model).glob("fold_*/validation/*"):
        os.utime(path, (1e9, 1e9))
    assert crossval_summary_file(dirs, model).stat().st_mtime == 1e9 + 100  # fresh: reused
    os.utime(dirs.model_dir(model) / "fold_2/validation/summary.json", (1e9 + 200, 1e9 + 200))
    assert crossval_summary_file(dirs, model).stat().st_mtime > 1e9 + 200  # stale: rebuilt


def test_a_configuration_without_results_names_the_training_command(tmp_path: Path) -> None:
    dirs = make_tree(tmp_path, {"2d": exact})
    plans = json.loads((dirs.preprocessed / "nnUNetPlans.json").read_text())
    plans["configurations"]["3d_fullres"] = {}
    (dirs.preprocessed / "nnUNetPlans.json").write_text(json.dumps(plans))
    with pytest.raises(
        DatasetError,
        match=(
            r"3d_fullres: results folder .* not found; train all folds with `nnunet-core train "
            r"Dataset901_Fake 3d_fullres FOLD --npz`"
        ),
    ):
        find_best_configuration(dirs, [TrainedModel("2d"), TrainedModel("3d_fullres")])


def test_predict_command_sees_an_inherited_previous_stage(tmp_path: Path) -> None:
    """A configuration inheriting from a cascade stage is a cascade stage too (inherits_from)."""
    dirs = DatasetDirs("Dataset901_Fake", tmp_path / "results", tmp_path / "preprocessed")
    model = TrainedModel("3d_cascade_custom")
    plans = {
        "plans_name": "nnUNetPlans",
        "configurations": {
            "3d_lowres": {"data_identifier": "low"},
            "3d_cascade_fullres": {"data_identifier": "full", "previous_stage": "3d_lowres"},
            "3d_cascade_custom": {"inherits_from": "3d_cascade_fullres", "batch_size": 1},
        },
    }
    dirs.model_dir(model).mkdir(parents=True)
    (dirs.model_dir(model) / "plans.json").write_text(json.dumps(plans))
    command = predict_command(dirs, model, [0], "OUT", False)
    assert "-prev_stage_predictions OUTPUT_FOLDER_PREV_STAGE" in command
    assert "-c 3d_lowres" in command
    # two runnable steps: the previous stage into the folder, then the cascade reading it
    comment, first, second = command.splitlines()
    assert comment.startswith("# 3d_cascade_custom is a cascade stage: predict 3d_lowres")
    assert "-o OUTPUT_FOLDER_PREV_STAGE" in first and "-c 3d_lowres" in first
    assert "-prev_stage" not in first
    assert "-c 3d_cascade_custom" in second and "-o OUT " in second
