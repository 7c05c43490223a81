"""Preprocessing parity with upstream nnU-Net 2.8.1 on the reference datasets, and the command.

tests/data/preprocessing/Dataset95x_* hold the raw data, the plans and what upstream stored
(native .b2nd arrays, properties as JSON, blosc2 layouts), copied from the reference runs
(REFERENCE-CASES.md section 4). 951: 2-channel anisotropic MR (masked ZScore, separate-z
resampling); 952: CT normalization, plain 3-D order-3 resampling.

Tolerance for data: none. We call the same interpolation code (scipy's zoom via the skimage
rule, order-0 ``map_coordinates`` picks) with the same float32 normalization arithmetic, and the
measured max |ours - upstream| is 0.0 on all 24 case/configuration pairs, so any difference is a
regression.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import blosc2
import numpy as np
import pytest

from nnunet_core.dataset.discovery import training_cases
from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.io.blosc2_store import open_case
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import load_plans
from nnunet_core.preprocessing.foreground import (
    locations_from_json,
    locations_to_json,
    num_samples,
    sample_class_locations,
)
from nnunet_core.preprocessing.normalization import normalize, scheme_for_channel
from nnunet_core.preprocessing.preprocessor import SUMMARY_NAME, preprocess_dataset, run_case
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "preprocessing"
DATASETS = ("Dataset951_PPAnisoMR", "Dataset952_PPCT")
IDENTIFIERS = ("nnUNetPlans_2d", "nnUNetPlans_3d_fullres")
PROPERTY_KEYS = {
    "sitk_stuff",
    "spacing",
    "shape_before_cropping",
    "bbox_used_for_cropping",
    "shape_after_cropping_and_before_resampling",
    "class_locations",
}


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both reference datasets preprocessed (2d and 3d_fullres in one run) into a temp folder."""
    out = {}
    for name in DATASETS:
        target = tmp_path_factory.mktemp("pre") / name
        source = DATA / name
        preprocess_dataset(
            source / "raw",
            target,
            load_plans(source / "nnUNetPlans.json"),
            ["2d", "3d_fullres"],
            load_dataset_json(source / "dataset.json"),
            num_processes=1,
            disable_progress=True,
        )
        out[name] = target
    return out


def _cases(name: str) -> list[str]:
    return sorted(p.name.removesuffix(".nii.gz") for p in (DATA / name / "raw/labelsTr").iterdir())


def _check_locations(ours: dict[str, list], expected: dict[str, dict], where: str) -> None:
    assert set(ours) == set(expected), where
    for key, exp in expected.items():
        coords = np.asarray(ours[key], dtype="<i8").reshape(-1, 4)
        assert coords.shape[0] == exp["num_locations"], (where, key)
        assert coords[:5].tolist() == exp["first_5"], (where, key)
        assert hashlib.sha256(coords.tobytes()).hexdigest() == exp["sha256_all_int64_le"], (
            where,
            key,
        )
        if coords.shape[0]:
            assert coords.min(0).tolist() == exp["min_per_axis"], (where, key)
            assert coords.max(0).tolist() == exp["max_per_axis"], (where, key)
            assert coords.sum(0).tolist() == exp["sum_per_axis"], (where, key)


@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("identifier", IDENTIFIERS)
def test_arrays_and_properties_match_upstream(
    ours: dict[str, Path], name: str, identifier: str
) -> None:
    expected_dir = DATA / name / identifier
    layout = json.loads((expected_dir / "blosc2_layout.json").read_text())
    for case in _cases(name):
        where = f"{name}/{identifier}/{case}"
        data, seg, props = open_case(ours[name] / identifier, case)
        exp_data = blosc2.open(str(expected_dir / f"{case}.b2nd"))[:]
        exp_seg = blosc2.open(str(expected_dir / f"{case}_seg.b2nd"))[:]
        assert data.shape == exp_data.shape and seg.shape == exp_seg.shape, where
        assert data.dtype == np.float32 and seg.dtype == np.int16, where
        assert np.array_equal(seg[:], exp_seg), where
        # tolerance 0: bit-identical (measured max abs diff 0.0 everywhere)
        assert np.array_equal(data[:], exp_data), (where, float(np.abs(data[:] - exp_data).max()))
        exp_props = json.loads((expected_dir / f"{case}_properties.json").read_text())
        assert set(props) == PROPERTY_KEYS, where
        for key in PROPERTY_KEYS - {"class_locations"}:
            assert props[key] == exp_props[key], (where, key)
        _check_locations(props["class_locations"], exp_props["class_locations"], where)
        for array, kind in ((data, "data"), (seg, "seg")):
            exp = layout[case][kind]
            assert list(array.chunks) == exp["chunks"], (where, kind)
            assert list(array.blocks) == exp["blocks"], (where, kind)
            cparams = array.schunk.cparams
            assert (cparams.codec.name, cparams.clevel) == (exp["codec"], exp["clevel"]), where
            assert cparams.filters[0].name == exp["filters"][0], (where, kind)


@pytest.mark.parametrize("configuration", ["2d", "3d_fullres"])
def test_single_configuration_run_case_matches_too(configuration: str) -> None:
    """Without sharing between configurations (one case that is resampled along z in 3d)."""
    source = DATA / "Dataset951_PPAnisoMR"
    dataset_json = load_dataset_json(source / "dataset.json")
    case = next(
        c for c in training_cases(source / "raw", dataset_json) if c.identifier == "ppmr_001"
    )
    data, seg, props = run_case(
        case, load_plans(source / "nnUNetPlans.json"), configuration, dataset_json
    )
    expected = source / f"nnUNetPlans_{configuration}"
    assert np.array_equal(data, blosc2.open(str(expected / "ppmr_001.b2nd"))[:])
    assert np.array_equal(seg, blosc2.open(str(expected / "ppmr_001_seg.b2nd"))[:])
    exp_props = json.loads((expected / "ppmr_001_properties.json").read_text())
    _check_locations(props["class_locations"], exp_props["class_locations"], configuration)


def test_summary_and_store_contents(ours: dict[str, Path]) -> None:
    for name in DATASETS:
        for identifier in IDENTIFIERS:
            folder = ours[name] / identifier
            summary = json.loads((folder / SUMMARY_NAME).read_text())
            assert sorted(summary["cases"]) == _cases(name)
            assert summary["data_identifier"] == identifier
            assert not list(folder.glob("*.pkl")) and not list(folder.glob(".*"))
        assert not [p for p in ours[name].iterdir() if p.name.startswith(".")]


def test_normalization_schemes_and_errors() -> None:
    assert scheme_for_channel("CT") == "CTNormalization"
    assert scheme_for_channel("noNorm") == "NoNormalization"
    assert scheme_for_channel("rescale_to_0_1") == "RescaleTo01Normalization"
    assert scheme_for_channel("RGB_to_0_1") == "RGBTo01Normalization"
    assert scheme_for_channel("T2") == scheme_for_channel("R") == "ZScoreNormalization"
    data = np.zeros((1, 4, 4, 4), np.float32)
    data[0, 1:3, 1:3, 1:3] = np.arange(8, dtype=np.float32).reshape(2, 2, 2) + 1
    seg = np.where(data > 0, 0, -1).astype(np.int16)
    out = normalize(data.copy(), seg, ["ZScoreNormalization"], [True], None)
    inside = out[0][seg[0] >= 0]
    assert np.all(out[0][seg[0] < 0] == 0) and abs(float(inside.mean())) < 1e-6
    ct = {"0": {"mean": 2.0, "std": 4.0, "percentile_00_5": 1.0, "percentile_99_5": 5.0}}
    out = normalize(data.copy(), seg, ["CTNormalization"], [False], ct)
    assert out.min() == np.float32(-0.25) and out.max() == np.float32(0.75)
    out = normalize(data.copy(), seg, ["RescaleTo01Normalization"], [False], None)
    assert out.min() == 0 and out.max() == 1
    with pytest.raises(DatasetError, match="case c7"):
        normalize(data * 100, seg, ["RGBTo01Normalization"], [False], None, "c7")
    with pytest.raises(ConfigurationError, match="case c7.*Bogus"):
        normalize(data.copy(), seg, ["Bogus"], [False], None, "c7")
    with pytest.raises(ConfigurationError, match="foreground_intensity_properties"):
        normalize(data.copy(), seg, ["CTNormalization"], [False], {}, "c7")


def test_class_locations_follow_upstreams_sampling() -> None:
    rng = np.random.default_rng(3)
    seg = rng.integers(-1, 3, size=(1, 30, 40, 50)).astype(np.int16)
    ours = sample_class_locations(seg, [1, 2, (2, 1), 7])
    rnd = np.random.RandomState(1234)  # upstream: one RandomState over the classes in order
    for key in (1, 2, (2, 1)):
        # a label's voxels in C order; a region's label by label in the region's order
        labels = key if isinstance(key, tuple) else (key,)
        locs = np.concatenate([np.argwhere(seg == label) for label in labels])
        expected = locs[rnd.choice(len(locs), num_samples(len(locs)), replace=False)]
        assert np.array_equal(ours[key], expected)
    assert ours[7].shape == (0, 4)
    back = locations_from_json(locations_to_json(ours))
    assert list(back) == [1, 2, (2, 1), 7] and np.array_equal(back[(2, 1)], ours[(2, 1)])
    assert num_samples(5) == 5 and num_samples(20000) == 10000 and num_samples(2_000_001) == 20001


def _setup_roots(tmp_path: Path, name: str = "Dataset951_PPAnisoMR") -> tuple[Path, Path]:
    raw, pre = tmp_path / "raw", tmp_path / "pre"
    shutil.copytree(DATA / name / "raw", raw / name)
    (pre / name).mkdir(parents=True)
    for file in ("nnUNetPlans.json", "dataset.json"):
        shutil.copy(DATA / name / file, pre / name / file)
    return raw, pre


def _cli(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nnunet_core", "preprocess", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_command_writes_identifiers_summary_and_gt(tmp_path: Path) -> None:
    raw, pre = _setup_roots(tmp_path)
    roots = ["--raw", str(raw), "--preprocessed", str(pre)]
    result = _cli("-d", "951", *roots, "-c", "2d", "3d_fullres", "-np", "2")
    assert result.returncode == 0, result.stderr
    folder = pre / "Dataset951_PPAnisoMR"
    for identifier in IDENTIFIERS:
        summary = json.loads((folder / identifier / SUMMARY_NAME).read_text())
        assert sorted(summary["cases"]) == _cases("Dataset951_PPAnisoMR")
        assert len(list((folder / identifier).glob("*_seg.b2nd"))) == 6
    assert sorted(p.name for p in (folder / "gt_segmentations").iterdir()) == sorted(
        p.name for p in (raw / "Dataset951_PPAnisoMR/labelsTr").iterdir()
    )
    # a rerun replaces the folder; a failing run leaves the previous result untouched
    stamp = (folder / "nnUNetPlans_2d" / SUMMARY_NAME).read_text()
    (raw / "Dataset951_PPAnisoMR/imagesTr/ppmr_003_0001.nii.gz").write_bytes(b"broken")
    result = _cli("-d", "951", *roots, "-c", "2d")
    assert result.returncode == 2 and "ppmr_003" in result.stderr
    assert (folder / "nnUNetPlans_2d" / SUMMARY_NAME).read_text() == stamp
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def test_command_rejects_unknown_configuration(tmp_path: Path) -> None:
    raw, pre = _setup_roots(tmp_path, "Dataset952_PPCT")
    result = _cli("-d", "952", "--raw", str(raw), "--preprocessed", str(pre), "-c", "3d_lowres")
    assert result.returncode == 2 and "3d_lowres" in result.stderr
