"""What the workflow's input functions ask for (nnunet_core.workflow.inputs), from small plans
and selection dicts and the path patterns run_paths.RunPaths declares."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from nnunet_core.io.plans import Plans
from nnunet_core.workflow import inputs

FOLD_SUMMARY = "/r/D/T__P__{configuration}/fold_{fold}/validation/summary.json"
FINAL = "/r/D/T__P__{configuration}/fold_{fold}/checkpoint_final.pth"
CROSSVAL = "/r/D/T__P__{configuration}/crossval_results_folds_0_1/summary.json"
ENSEMBLE = "/r/D/ensembles/ensemble___{first}___{second}___0_1/summary.json"


def cascade_plans() -> Plans:
    """The planner's four configurations: the cascade shares 3d_fullres's data."""
    return Plans(cascade_plans_raw())


def cascade_plans_raw() -> dict:
    return {
        "plans_name": "nnUNetPlans",
        "configurations": {
            "2d": {"data_identifier": "nnUNetPlans_2d"},
            "3d_fullres": {"data_identifier": "nnUNetPlans_3d_fullres"},
            "3d_lowres": {"data_identifier": "nnUNetPlans_3d_lowres"},
            "3d_cascade_fullres": {"inherits_from": "3d_fullres", "previous_stage": "3d_lowres"},
        },
    }


def test_raw_training_files_list_dataset_json_then_each_folders_files(tmp_path: Path) -> None:
    for name in ("imagesTr/b_0000.nii.gz", "imagesTr/a_0000.nii.gz", "labelsTr/a.nii.gz"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "imagesTr" / "nested").mkdir()
    dataset_json = tmp_path / "dataset.json"
    found = inputs.raw_training_files(tmp_path, dataset_json)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "dataset.json",
        "imagesTr/a_0000.nii.gz",
        "imagesTr/b_0000.nii.gz",
        "labelsTr/a.nii.gz",
    ]


def test_raw_training_files_without_folders_is_the_dataset_json(tmp_path: Path) -> None:
    assert inputs.raw_training_files(tmp_path, tmp_path / "dataset.json") == [
        tmp_path / "dataset.json"
    ]


def test_read_json_reads_a_checkpoint_output(tmp_path: Path) -> None:
    (tmp_path / "plans.json").write_text(json.dumps(cascade_plans_raw()))
    assert inputs.read_json(tmp_path / "plans.json") == cascade_plans_raw()


def test_read_plans_gives_the_typed_view_of_the_plan_output(tmp_path: Path) -> None:
    (tmp_path / "plans.json").write_text(json.dumps(cascade_plans_raw()))
    plans = inputs.read_plans(tmp_path / "plans.json")
    assert plans.raw == cascade_plans_raw()
    assert plans.previous_stage_of("3d_cascade_fullres") == "3d_lowres"


def test_every_planned_configuration_is_chosen_with_all_folds() -> None:
    seen: list[str] = []
    chosen = inputs.chosen_configurations(
        cascade_plans(), None, [0, 1, 2, 3, 4], 5, notify=seen.extend, error=seen.append
    )
    assert chosen == ["2d", "3d_fullres", "3d_lowres", "3d_cascade_fullres"]
    assert seen == []


def test_the_cascade_is_left_out_with_one_notice_shown_once() -> None:
    shown: list[str] = []
    notify = inputs.NoticesOnce(shown.append)
    for _ in range(3):  # the input functions read the plans many times
        chosen = inputs.chosen_configurations(
            cascade_plans(), None, [0], 5, notify=notify, error=shown.append
        )
    assert "3d_cascade_fullres" not in chosen
    assert len(shown) == 1 and shown[0].startswith("3d_cascade_fullres left out")


def test_a_configuration_missing_from_the_plans_stops_with_one_line(caplog) -> None:
    logger = logging.getLogger("test_workflow_inputs")
    with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as stop:
        inputs.chosen_configurations(
            cascade_plans(), ["3d_huge"], [0], 5, notify=list, error=logger.error
        )
    assert stop.value.code == 2
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith("ConfigurationError: ")
    assert "3d_huge not in the plans" in caplog.records[0].getMessage()


def test_shared_data_is_preprocessed_once_by_a_trainable_configuration() -> None:
    plans = cascade_plans()
    chosen = ["3d_cascade_fullres", "3d_lowres", "3d_fullres"]
    assert inputs.configuration_per_identifier(plans, chosen) == {
        "nnUNetPlans_3d_fullres": "3d_fullres",
        "nnUNetPlans_3d_lowres": "3d_lowres",
    }
    pre = Path("/p/D")
    targets = inputs.preprocessing_targets(pre, ["nnUNetPlans_2d"])
    assert [t.parent for t in targets] == [pre / "nnUNetPlans_2d"]
    data = inputs.preprocessed_data_of_configuration(plans, pre, "3d_cascade_fullres")
    assert data.parent == pre / "nnUNetPlans_3d_fullres"


def test_a_cascade_fold_waits_for_every_fold_of_its_previous_stage() -> None:
    plans = cascade_plans()
    needed = inputs.previous_stage_summaries(plans, "3d_cascade_fullres", FOLD_SUMMARY, 3)
    assert needed == [f"/r/D/T__P__3d_lowres/fold_{k}/validation/summary.json" for k in range(3)]
    assert inputs.previous_stage_summaries(plans, "3d_fullres", FOLD_SUMMARY, 3) == []


def test_a_cascade_prediction_reads_its_previous_stages_predictions() -> None:
    plans = cascade_plans()
    folder = Path("/w/predictions/D")
    assert inputs.previous_stage_predictions(plans, "3d_cascade_fullres", folder) == [
        folder / "3d_lowres"
    ]
    assert inputs.previous_stage_predictions(plans, "2d", folder) == []


def test_training_targets_are_each_folds_summary() -> None:
    """Only the summary: a failed fold job must not lose checkpoint_final.pth (train.smk)."""
    targets = inputs.training_targets(["2d", "3d_fullres"], [0, "all"], FOLD_SUMMARY)
    assert targets == [
        "/r/D/T__P__2d/fold_0/validation/summary.json",
        "/r/D/T__P__2d/fold_all/validation/summary.json",
        "/r/D/T__P__3d_fullres/fold_0/validation/summary.json",
        "/r/D/T__P__3d_fullres/fold_all/validation/summary.json",
    ]
    assert inputs.per_fold(FINAL, "2d", [1, 2]) == [
        "/r/D/T__P__2d/fold_1/checkpoint_final.pth",
        "/r/D/T__P__2d/fold_2/checkpoint_final.pth",
    ]


def test_selection_compares_every_configuration_and_every_pair() -> None:
    summaries = inputs.crossval_and_ensemble_summaries(
        ["2d", "3d_fullres", "3d_lowres"], CROSSVAL, ENSEMBLE
    )
    assert summaries[:3] == inputs.crossval_summaries(CROSSVAL, ["2d", "3d_fullres", "3d_lowres"])
    assert summaries[3:] == [
        "/r/D/ensembles/ensemble___2d___3d_fullres___0_1/summary.json",
        "/r/D/ensembles/ensemble___2d___3d_lowres___0_1/summary.json",
        "/r/D/ensembles/ensemble___3d_fullres___3d_lowres___0_1/summary.json",
    ]
    assert inputs.crossval_and_ensemble_summaries(["2d"], CROSSVAL, ENSEMBLE) == [
        "/r/D/T__P__2d/crossval_results_folds_0_1/summary.json"
    ]


def test_the_selection_names_the_winners_and_their_postprocessing() -> None:
    selection = {
        "best_model_or_ensemble": {
            "selected_model_or_models": [
                {"configuration": "2d", "trainer": "T"},
                {"configuration": "3d_fullres", "trainer": "T"},
            ],
            "postprocessing_file": "/r/D/ensembles/e/postprocessing.pkl",
        }
    }
    assert inputs.winner_configurations(selection) == ["2d", "3d_fullres"]
    assert inputs.postprocessing_file(selection) == "/r/D/ensembles/e/postprocessing.pkl"


def test_final_targets_include_test_predictions_only_with_a_test_set() -> None:
    page, final = Path("/r/D/report/report.md"), Path("/w/predictions/D/final")
    assert inputs.final_targets(page, final, has_test_set=True) == [page, final]
    assert inputs.final_targets(page, final, has_test_set=False) == [page]
