"""An archive we export carries upstream's ``postprocessing.pkl``, and upstream's
``nnUNetv2_apply_postprocessing`` (peer venv) applies it as we apply our ``postprocessing.json``.

The selected postprocessing has two steps (keep the largest component of labels 1 and 2
together, then of label 2 alone); two segmentations with stray components of both labels go
through upstream's command with the pickle from our zip and through our steps from the JSON.
"""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from nnunet_core.cli import main
from nnunet_core.evaluation.postprocessing import apply_steps, load_postprocessing
from tests.helpers.fake_results import FILE_ENDING, read_seg_file, write_seg_file
from tests.helpers.model_sharing import DATASET, KEEP_LARGEST, MODELS, make_results
from tests.helpers.peer import HAS_PEER, PEER_BIN, upstream

CROSSVAL = f"{DATASET}/{MODELS['3d_fullres']}/crossval_results_folds_0"
STEPS = {
    "postprocessing_fns": [KEEP_LARGEST, KEEP_LARGEST],
    "postprocessing_kwargs": [{"labels_or_regions": [1, 2]}, {"labels_or_regions": 2}],
    "steps_tried": [
        {"scope": "all foreground", "accepted": True},
        {"scope": "1", "accepted": False},
        {"scope": "2", "accepted": True},
    ],
}


def segmentation(shift: int) -> np.ndarray:
    """Label 1 and 2 boxes touching each other, and a stray voxel of each far away."""
    seg = np.zeros((6, 10, 10), dtype=np.uint8)
    seg[1:4, 1 + shift : 5 + shift, 1:5] = 1
    seg[1:4, 1 + shift : 5 + shift, 5:8] = 2
    seg[5, 9, 0] = 1
    seg[0, 9, 9] = 2
    return seg


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    root = tmp_path_factory.mktemp("pp_pickle")
    results = make_results(root / "results")
    (results / CROSSVAL / "postprocessing.json").write_text(json.dumps(STEPS))
    archive = root / "model.zip"
    code = main(["export-model-to-zip", "-d", DATASET, "-o", str(archive), "--results",
                 str(results), "-c", "3d_fullres", "-f", "0"])  # fmt: skip
    assert code == 0
    with zipfile.ZipFile(archive) as handle:
        names = handle.namelist()
        pickled = handle.read(f"{CROSSVAL}/postprocessing.pkl")
    assert names.index(f"{CROSSVAL}/postprocessing.pkl") + 1 == names.index(
        f"{CROSSVAL}/postprocessing.json"
    )  # upstream's order: summary.json, postprocessing.pkl, postprocessing.json
    return results, pickled


def test_the_pickle_holds_upstreams_structure_with_plain_types(exported) -> None:
    _results, pickled = exported
    strings = {
        arg for op, arg, _pos in pickletools.genops(pickled) if op.name == "SHORT_BINUNICODE"
    }
    assert {"nnunetv2.postprocessing.remove_connected_components", KEEP_LARGEST} <= strings
    assert not any("nnunet_core" in s for s in strings)
    with pytest.raises(ModuleNotFoundError, match="nnunetv2"):  # a reference, not our code
        pickle.loads(pickled)  # noqa: S301 - our own bytes


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv here")
def test_upstream_loads_the_pickle_as_its_own_functions(exported, tmp_path) -> None:
    _results, pickled = exported
    (tmp_path / "postprocessing.pkl").write_bytes(pickled)
    script = (
        "import pickle, sys\n"
        "from nnunetv2.postprocessing.remove_connected_components import "
        "remove_all_but_largest_component_from_segmentation as keep\n"
        "fns, kwargs = pickle.load(open(sys.argv[1], 'rb'))\n"
        "assert fns == [keep, keep], fns\n"
        "assert kwargs == [{'labels_or_regions': [1, 2]}, {'labels_or_regions': 2}], kwargs\n"
        "assert type(kwargs[0]['labels_or_regions']) is list\n"
    )
    result = subprocess.run(
        [str(PEER_BIN / "python"), "-c", script, str(tmp_path / "postprocessing.pkl")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv here")
def test_upstreams_apply_postprocessing_equals_ours(exported, tmp_path) -> None:
    results, pickled = exported
    pkl = tmp_path / "postprocessing.pkl"
    pkl.write_bytes(pickled)
    inputs, outputs = tmp_path / "in", tmp_path / "out"
    for shift in (0, 1):
        write_seg_file(inputs / f"case_{shift}{FILE_ENDING}", segmentation(shift))
    plans = json.loads((results / DATASET / MODELS["3d_fullres"] / "plans.json").read_text())
    plans["image_reader_writer"] = "SimpleITKIO"
    (tmp_path / "plans.json").write_text(json.dumps(plans))
    dataset_json = results / DATASET / MODELS["3d_fullres"] / "dataset.json"
    upstream(dict(os.environ), "nnUNetv2_apply_postprocessing", "-i", str(inputs), "-o",
             str(outputs), "-pp_pkl_file", str(pkl), "-np", "1", "-plans_json",
             str(tmp_path / "plans.json"), "-dataset_json", str(dataset_json))  # fmt: skip
    steps = load_postprocessing(results / CROSSVAL / "postprocessing.json")
    for shift in (0, 1):
        theirs = read_seg_file(outputs / f"case_{shift}{FILE_ENDING}")
        ours = apply_steps(segmentation(shift), steps)
        assert np.array_equal(theirs, ours), shift
        assert theirs[5, 9, 0] == 0 and theirs[0, 9, 9] == 0  # the stray voxels went
