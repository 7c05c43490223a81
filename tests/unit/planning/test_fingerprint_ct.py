"""The fingerprint equals upstream's to the last digit on real-size CT-like data.

Two generated 512 x 512 x 20 int16 cases (``tests/helpers/ct_like.py``); upstream's fingerprint
of the same data is stored in ``tests/data/fingerprint_ct/expected.json`` by the script beside it
(run in the peer venv). With ~1e8 float32 samples, a mean or std summed in any other order than
numpy's pairwise float32 tree differs from upstream's in the 7th significant digit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnunet_core.planning.fingerprint import extract_fingerprint
from tests.helpers import ct_like
from tests.helpers.paths import TEST_DATA

EXPECTED = TEST_DATA / "fingerprint_ct" / "expected.json"


@pytest.fixture(scope="module")
def fingerprint(tmp_path_factory: pytest.TempPathFactory) -> dict:
    raw = ct_like.write_dataset(tmp_path_factory.mktemp("ct_like"))
    return extract_fingerprint(raw, num_processes=2)


def test_every_number_equals_upstreams(fingerprint: dict) -> None:
    expected = json.loads(EXPECTED.read_text())
    assert sorted(fingerprint) == sorted(expected)
    for key in ("spacings", "shapes_after_crop", "median_relative_size_after_cropping"):
        assert fingerprint[key] == expected[key], key
    ours = fingerprint["foreground_intensity_properties_per_channel"]["0"]
    theirs = expected["foreground_intensity_properties_per_channel"]["0"]
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        assert ours[key] == value, (key, ours[key], value)  # exactly, mean and std included


def test_the_stored_numbers_come_from_the_script_beside_them() -> None:
    script = Path(EXPECTED.parent / "make_expected.py").read_text()
    assert "DatasetFingerprintExtractor" in script and "ct_like.write_dataset" in script
