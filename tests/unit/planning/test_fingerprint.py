"""Fingerprint extraction vs upstream's dataset_fingerprint.json, and its sampling shortcuts.

Known difference: upstream averages ~1e8 float32 samples with float32 pairwise summation; we sum
the (value, count) multiset exactly in float64 and round once to float32. ``mean`` and ``std``
may therefore differ from upstream's by about one float32 ulp (~1e-7 relative); every other value
(spacings, shapes, relative size, min, max, median, percentiles) must be identical.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.commands import fingerprint as fingerprint_command
from nnunet_core.errors import DatasetError
from nnunet_core.planning import fingerprint as fp
from nnunet_core.preprocessing.cropping import bbox_of, crop_to_nonzero
from tests.helpers.paths import TEST_DATA

RAW = TEST_DATA / "preprocessing"
REFERENCE = TEST_DATA / "plans" / "preprocessing_cases"
DATASETS = ["Dataset951_PPAnisoMR", "Dataset952_PPCT"]
ULP_TOLERANT: set[str] = set()  # mean and std too: upstream's float32 arithmetic, to the last bit


@pytest.mark.parametrize("name", DATASETS)
def test_fingerprint_equals_upstream(name: str) -> None:
    raw = RAW / name / "raw"
    assert (raw / "dataset.json").is_file(), f"copy {name}/raw into {RAW} (see the brief)"
    mine = fp.extract_fingerprint(raw, num_processes=2)
    ref = json.loads((REFERENCE / name / "dataset_fingerprint.json").read_text())
    assert list(mine) == list(ref)
    for key in ("spacings", "shapes_after_crop", "median_relative_size_after_cropping"):
        assert mine[key] == ref[key], key
    stats, ref_stats = (
        mine["foreground_intensity_properties_per_channel"],
        ref["foreground_intensity_properties_per_channel"],
    )
    assert list(stats) == list(ref_stats)
    for channel, expected in ref_stats.items():
        assert list(stats[channel]) == list(expected)
        for key, value in expected.items():
            if key in ULP_TOLERANT:
                assert stats[channel][key] == pytest.approx(value, rel=3e-7), (channel, key)
            else:
                assert stats[channel][key] == value, (channel, key)


def test_serial_and_parallel_runs_agree() -> None:
    raw = RAW / "Dataset952_PPCT" / "raw"
    assert fp.extract_fingerprint(raw, 1) == fp.extract_fingerprint(raw, 3)


def test_chunked_counts_equal_upstream_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fp, "_DRAW_CHUNK", 1000)
    for n in (1, 7, 70000):
        rng_a, rng_b = np.random.RandomState(1234), np.random.RandomState(1234)
        for _ in range(2):  # the second channel continues the same stream
            expected = np.bincount(rng_a.choice(np.arange(n), 4321, replace=True), minlength=n)
            assert np.array_equal(fp.sample_counts(n, 4321, rng_b), expected)


def test_weighted_statistics_equal_materialized_samples() -> None:
    rng = np.random.RandomState(0)
    cases = [(rng.gamma(2.0, 30.0, size=s) - 40).astype(np.float32) for s in (500, 1, 3000)]
    cases[0][:200] = np.round(cases[0][:200])  # duplicates across and within cases, zeros
    cases[2][:50] = 0.0
    samples, parts = [], []
    for values in cases:
        samples.append(np.random.RandomState(1234).choice(values, 20000, replace=True))
        parts.append(fp.weighted_foreground(values, 20000, np.random.RandomState(1234)))
    stats = fp.intensity_statistics(parts, as_float32=True)
    assert fp.intensity_statistics([fp.merge_weighted(parts)], as_float32=True) == stats
    all_samples = np.concatenate(samples)
    low, median, high = np.percentile(all_samples, (0.5, 50.0, 99.5))
    assert stats["min"] == float(all_samples.min()) and stats["max"] == float(all_samples.max())
    assert [stats["percentile_00_5"], stats["median"], stats["percentile_99_5"]] == [
        float(np.float32(v)) for v in (low, median, high)
    ]
    assert stats["mean"] == pytest.approx(float(all_samples.astype(np.float64).mean()), rel=1e-7)
    assert stats["std"] == pytest.approx(float(all_samples.astype(np.float64).std()), rel=1e-6)


def test_bbox_without_hole_filling_equals_crop_to_nonzero() -> None:
    data = np.zeros((2, 12, 14, 16), np.float32)
    data[0, 2:9, 3:11, 4:13] = 5
    data[0, 4:6, 5:8, 6:9] = 0  # an enclosed cavity: filled by crop_to_nonzero
    data[1, 1, 6, 7] = 3  # second channel widens the box
    _, _, bbox = crop_to_nonzero(data, np.zeros((1, 12, 14, 16), np.int16))
    assert bbox_of(np.any(data != 0, axis=0)) == bbox == [[1, 9], [3, 11], [4, 13]]


def _write_case(folder: Path, case: str, image: np.ndarray, seg: np.ndarray) -> None:
    for sub, array, suffix in (("imagesTr", image, "_0000"), ("labelsTr", seg, "")):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        itk = sitk.GetImageFromArray(array)
        itk.SetSpacing((0.5, 0.75, 2.0))
        sitk.WriteImage(itk, str(folder / sub / f"{case}{suffix}.nii.gz"))


def _body() -> np.ndarray:
    return ((np.arange(4 * 5 * 6).reshape(4, 5, 6) + 1) * 0.1).astype(np.float32)


def _tiny_dataset(folder: Path, with_foreground: tuple[bool, ...]) -> None:
    dataset = {
        "channel_names": {"0": "MR"},
        "labels": {"background": 0, "a": 1},
        "numTraining": len(with_foreground),
        "file_ending": ".nii.gz",
    }
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(dataset))
    for i, has_fg in enumerate(with_foreground):
        image = np.zeros((6, 8, 10), np.float32)
        image[1:5, 2:7, 3:9] = _body()
        seg = np.zeros((6, 8, 10), np.uint8)
        if has_fg:
            seg[2:4, 3:5, 4:6] = 1
        _write_case(folder, f"c_{i:03d}", image, seg)


def test_case_without_foreground_gives_float64_statistics(tmp_path: Path) -> None:
    _tiny_dataset(tmp_path / "raw", (True, False))
    result = fp.extract_fingerprint(tmp_path / "raw", 1)
    assert result["spacings"] == [[2.0, 0.75, 0.5]] * 2
    assert result["shapes_after_crop"] == [[4, 5, 6]] * 2
    assert result["median_relative_size_after_cropping"] == pytest.approx(120 / 480)
    stats = result["foreground_intensity_properties_per_channel"]["0"]
    foreground = _body()[1:3, 1:3, 1:3]
    assert (stats["min"], stats["max"]) == (float(foreground.min()), float(foreground.max()))
    # upstream's concatenation with an empty case is float64: no rounding to float32
    assert stats["mean"] != float(np.float32(stats["mean"]))


def test_no_foreground_anywhere_is_a_dataset_error(tmp_path: Path) -> None:
    _tiny_dataset(tmp_path / "raw", (False, False))
    with pytest.raises(DatasetError, match="no foreground voxels"):
        fp.extract_fingerprint(tmp_path / "raw", 1)


def test_fingerprint_command_always_writes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _tiny_dataset(tmp_path / "raw" / "Dataset999_Tiny", (True,))
    target = tmp_path / "pre" / "Dataset999_Tiny" / "dataset_fingerprint.json"
    target.parent.mkdir(parents=True)
    target.write_text("{}")  # a stale file is replaced, not reused
    parser = argparse.ArgumentParser()
    fingerprint_command.configure_parser(parser)
    args = parser.parse_args(
        [
            "-d",
            "999",
            "--raw",
            str(tmp_path / "raw"),
            "--preprocessed",
            str(tmp_path / "pre"),
            "-np",
            "1",
            "--clean",
        ]
    )
    assert fingerprint_command.run(args) == 0
    written = json.loads(target.read_text())
    assert written["shapes_after_crop"] == [[4, 5, 6]]
    assert "1 cases" in capsys.readouterr().out
