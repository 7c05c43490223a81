"""The selection's files read back from a results tree that may come from elsewhere (issue 51,
part 5): a malformed ``inference_information.json`` or ``postprocessing.json`` is one error
naming the file and the key, for each reader (report, paper tables, workflow, export), never a
KeyError or TypeError. The command-line cases are in tests/integration/test_malformed_inputs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.evaluation.postprocessing_file import KEEP_LARGEST, read_postprocessing
from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.model_sharing.upstream_pickle import postprocessing_pickle
from nnunet_core.report.collect import collect
from nnunet_core.report.methods import methods_paragraph
from nnunet_core.report.outcome import collect_selection
from nnunet_core.report.summaries import ReportInputError
from nnunet_core.workflow import inputs

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"


def _info(**changes) -> dict:
    """The keys the selection writes (``find_best_configuration``), with ``changes``."""
    info = {
        "dataset_name_or_id": "Dataset900_Synth",
        "folds": [0, 1],
        "ensembling_allowed": True,
        "all_results": {MODEL: 0.8},
        "candidates": [
            {
                "identifier": MODEL,
                "kind": "single",
                "members": [MODEL],
                "source": "/r",
                "foreground_mean_dice": 0.8,
                "mean_dice": {"1": 0.8},
            }
        ],
        "winner": MODEL,
        "best_model_or_ensemble": {
            "identifier": MODEL,
            "result_on_crossval_pre_pp": 0.8,
            "result_on_crossval_post_pp": 0.81,
            "postprocessing_file": "/r/postprocessing.json",
            "some_plans_file": "/r/plans.json",
            "selected_model_or_models": [
                {"configuration": "3d_fullres", "trainer": "nnUNetTrainer", "plans_identifier": "p"}
            ],
        },
        "postprocessing": {"steps": [], "steps_tried": [], "mean_dice_before": {}},
    }
    info.update(changes)
    return info


def _best(**changes) -> dict:
    return {**_info()["best_model_or_ensemble"], **changes}


# id -> (the file's content, what the error says after the path)
BAD_INFO: dict[str, tuple[object, str]] = {
    "a_list": ([1, 2], "must hold a JSON object, not a list"),
    "winner_a_number": (_info(winner=3), "winner: 3 is not of type 'string'"),
    "folds_strings": (_info(folds=["a"]), "folds[0]: 'a' is not of type 'integer'"),
    "folds_negative": (_info(folds=[-1]), "folds[0]: -1 is less than the minimum of 0"),
    "candidates_an_object": (_info(candidates={}), "candidates: {} is not of type 'array'"),
    "candidate_without_identifier": (
        _info(candidates=[{"kind": "single"}]),
        "candidates[0]: 'identifier' is a required property",
    ),
    "members_not_strings": (
        _info(candidates=[{"identifier": MODEL, "members": [1]}]),
        "candidates[0].members[0]: 1 is not of type 'string'",
    ),
    "score_a_string": (_info(all_results={MODEL: "high"}), "all_results." + MODEL),
    "configuration_a_number": (
        _info(best_model_or_ensemble=_best(selected_model_or_models=[{"configuration": 5}])),
        "best_model_or_ensemble.selected_model_or_models[0].configuration: 5 is not of type",
    ),
    "no_models": (
        _info(best_model_or_ensemble=_best(selected_model_or_models=[])),
        "best_model_or_ensemble.selected_model_or_models: [] should be non-empty",
    ),
    "steps_a_string": (
        _info(postprocessing={"steps": "keep largest"}),
        "postprocessing.steps: 'keep largest' is not of type 'array'",
    ),
}


def _write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize("case", list(BAD_INFO), ids=list(BAD_INFO))
def test_a_malformed_selection_record_names_the_file_and_key(tmp_path: Path, case: str) -> None:
    content, needle = BAD_INFO[case]
    path = _write(tmp_path / "inference_information.json", content)
    with pytest.raises(DatasetError) as caught:
        read_inference_information(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and needle in message, message
    assert "\n" not in message


def test_the_selections_own_record_passes(tmp_path: Path) -> None:
    path = _write(tmp_path / "inference_information.json", _info())
    assert read_inference_information(path, needs_winner=True) == _info()


def test_the_report_and_methods_refuse_a_malformed_record_in_one_line(tmp_path: Path) -> None:
    results = tmp_path / "Dataset900_Synth"
    _write(results / "inference_information.json", _info(candidates="all"))
    for read in (collect, methods_paragraph):
        with pytest.raises(ReportInputError, match=r"candidates: 'all' is not of type 'array'"):
            read(results)
    (results / "inference_information.json").write_bytes(b"\x00\xff binary")
    with pytest.raises(ReportInputError, match=r"inference_information.json\) is not text"):
        collect(results)


def test_the_workflow_needs_the_winners_configurations(tmp_path: Path) -> None:
    path = _write(tmp_path / "inference_information.json", _info(best_model_or_ensemble={}))
    read_inference_information(path)  # the report can do without the winner's models
    with pytest.raises(ConfigurationError, match=r"'selected_model_or_models' is a required"):
        inputs.read_selection(path)
    good = _write(tmp_path / "good.json", _info())
    assert inputs.winner_configurations(inputs.read_selection(good)) == ["3d_fullres"]


def test_a_malformed_postprocessing_file_is_refused_by_export_and_report(tmp_path: Path) -> None:
    pp_file = _write(tmp_path / "postprocessing.json", {"postprocessing_fns": "x"})
    with pytest.raises(ConfigurationError, match=r"'postprocessing_fns' must be a list"):
        postprocessing_pickle(pp_file)
    info = _info(best_model_or_ensemble=_best(postprocessing_file=str(pp_file)))
    del info["postprocessing"]  # upstream's record: the report reads postprocessing.json
    with pytest.raises(ReportInputError, match=r"'postprocessing_fns' must be a list"):
        collect_selection(info, {}, [])
    steps = {
        "postprocessing_fns": [KEEP_LARGEST],
        "postprocessing_kwargs": [{"labels_or_regions": 1}],
    }
    _write(pp_file, {**steps, "input_folder": [], "steps_tried": "x"})
    with pytest.raises(ReportInputError, match=r"no 'input_folder' and 'postprocessed' summaries"):
        collect_selection(info, {}, [])
    summaries = {"mean": {"1": {"Dice": 0.5}}, "foreground_mean": {"Dice": 0.5}}
    _write(pp_file, {**steps, "input_folder": summaries, "postprocessed": summaries})
    selection = collect_selection(info, {}, [])
    assert selection is not None
    assert selection.steps == [{"function": KEEP_LARGEST, "labels_or_regions": 1}]
    assert postprocessing_pickle(pp_file)  # upstream's pickle of the well-formed file


def test_upstreams_postprocessing_file_is_read(tmp_path: Path) -> None:
    """Upstream's first step lists regions as lists (its tuples in JSON)."""
    content = {
        "postprocessing_fns": [KEEP_LARGEST, KEEP_LARGEST],
        "postprocessing_kwargs": [{"labels_or_regions": [[1, 2], [2]]}, {"labels_or_regions": 2}],
    }
    _, steps = read_postprocessing(_write(tmp_path / "postprocessing.json", content))
    assert [s["labels_or_regions"] for s in steps] == [[[1, 2], [2]], 2]
