"""The cascade's next-stage export against upstream's ``resample_and_save`` on the same logits.

tests/data/cascade/ holds a tiny dataset's cascade plans (3d_lowres -> 3d_cascade_fullres), two
cases' properties, fixed random lowres logits and what upstream 2.8.1 wrote for them
(``make_cascade_parity.py``, run once with the peer venv). Case A is given as float32, case B as
float16 (what upstream's sliding window returns); A is also exported with an anisotropic lowres
spacing (the separate-z path).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import blosc2
import numpy as np
import pytest
import torch

from nnunet_core.io.dataset_json import LabelSpec, parse_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.results import next_stage_file, previous_stage_dir, trained_model_dir
from nnunet_core.training.fold.next_stage import (
    computed_next_stage_shape,
    export_next_stage,
    exports_next_stage,
    next_stage_segmentation,
    segmentation_dtype,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "cascade"
NEXT = "3d_cascade_fullres"


def _json(name: str) -> Any:
    return json.loads((DATA / name).read_text())


RAW_PLANS = _json("plans.json")
PLANS = Plans(RAW_PLANS)
LABELS: LabelSpec = parse_dataset_json(_json("dataset.json")).label_spec
PROPERTIES = _json("properties.json")
UPSTREAM = _json("upstream.json")
LOGITS = dict(np.load(DATA / "logits.npz"))
EXPECTED = dict(np.load(DATA / "upstream_next_stage.npz"))


def _logits(key: str) -> torch.Tensor:
    """Case A as float32, case B as float16 (as the parity script passed them upstream)."""
    array = LOGITS[key]
    return torch.from_numpy(array.astype(np.float32) if key == "A" else array)


def _assert_identical(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.dtype == theirs.dtype
    assert ours.shape == theirs.shape
    mismatched = int((ours != theirs).sum())
    assert mismatched == 0, f"{mismatched} of {ours.size} voxels differ"


def test_the_stored_plans_are_a_cascade() -> None:
    lowres = RAW_PLANS["configurations"]["3d_lowres"]
    assert lowres["next_stage"] == NEXT
    assert RAW_PLANS["configurations"][NEXT]["previous_stage"] == "3d_lowres"
    assert PLANS.configuration("3d_lowres").next_stage == [NEXT]
    assert Configuration("x", {"next_stage": ["a", "b"]}).next_stage == ["a", "b"]
    assert PLANS.configuration("3d_fullres").next_stage == []


@pytest.mark.parametrize("key", ["A", "B"])
def test_next_stage_segmentation_is_upstreams(key: str) -> None:
    lowres = PLANS.configuration("3d_lowres")
    shape = UPSTREAM[f"fullres_shape_{key}"]
    ours = next_stage_segmentation(_logits(key), PROPERTIES[key], PLANS, lowres, LABELS, shape)
    _assert_identical(ours, EXPECTED[key])
    assert ours.dtype == np.uint8 and ours.ndim == 3  # upstream: no channel axis


def test_the_separate_z_path_is_upstreams() -> None:
    raw = copy.deepcopy(RAW_PLANS)
    raw["configurations"]["3d_lowres"]["spacing"] = UPSTREAM["anisotropic_lowres_spacing"]
    plans = Plans(raw)
    lowres = plans.configuration("3d_lowres")
    shape = UPSTREAM["fullres_shape_A"]
    ours = next_stage_segmentation(_logits("A"), PROPERTIES["A"], plans, lowres, LABELS, shape)
    _assert_identical(ours, EXPECTED["A_anisotropic"])
    assert not np.array_equal(ours, EXPECTED["A"])  # the path really differs


@pytest.mark.parametrize("key", ["A", "B"])
def test_computed_shape_is_the_next_stages_preprocessed_shape(key: str) -> None:
    fullres = PLANS.configuration(NEXT)
    computed = computed_next_stage_shape(PROPERTIES[key], PLANS, fullres)
    assert list(computed) == UPSTREAM[f"fullres_shape_{key}"]


def test_export_writes_upstreams_file(tmp_path: Path) -> None:
    """Without the next stage preprocessed, the shape is computed; the file holds upstream's
    array, with upstream's chunks and blocks (the producer's patch size)."""
    lowres = PLANS.configuration("3d_lowres")
    model_dir = trained_model_dir(tmp_path / "results", "3d_lowres")
    written = export_next_stage(
        _logits("B"), PROPERTIES["B"], PLANS, lowres, LABELS, model_dir, tmp_path, "case_b"
    )
    path = next_stage_file(model_dir, NEXT, "case_b")
    assert written == [path]
    assert path == model_dir / "predicted_next_stage" / NEXT / "case_b.b2nd"
    stored = blosc2.open(str(path), mode="r")
    _assert_identical(stored[:], EXPECTED["B"])
    layout = UPSTREAM["layout"]["B"]
    assert list(stored.chunks) == layout["chunks"]
    assert list(stored.blocks) == layout["blocks"]
    assert [p.name for p in path.parent.iterdir()] == ["case_b.b2nd"]  # no temporary left


def test_the_cascade_reads_where_the_lowres_stage_writes(tmp_path: Path) -> None:
    results = tmp_path / "results"
    model_dir = trained_model_dir(results, "3d_lowres")
    assert (
        previous_stage_dir(results, "3d_lowres", NEXT)
        == next_stage_file(model_dir, NEXT, "x").parent
    )


def test_fold_all_and_plain_configurations_export_nothing() -> None:
    lowres = PLANS.configuration("3d_lowres")
    assert exports_next_stage(lowres, 0)
    assert exports_next_stage(lowres, "4")
    assert not exports_next_stage(lowres, "all")
    assert not exports_next_stage(PLANS.configuration("3d_fullres"), 0)


def test_dtype_widens_from_255_foreground_labels() -> None:
    many = parse_dataset_json(
        {
            **_json("dataset.json"),
            "labels": {"background": 0, **{f"l{i}": i for i in range(1, 256)}},
        }
    ).label_spec
    assert segmentation_dtype(LABELS) is np.uint8
    assert segmentation_dtype(many) is np.uint16
