"""The real-size CT preset is planned by upstream nnU-Net 2.8.1 exactly as by us.

Three CT-like cases of ``synthesize --preset ct`` (512 x 512 x 64:
``tests/helpers/realscale_plans.py``) go through our ``fingerprint`` and ``plan``; the fingerprint
and nnUNetPlans.json must equal upstream's of the same data (``nnUNetv2_extract_fingerprint``,
``nnUNetv2_plan_experiment``), key order and number types included. Upstream's files are stored in
tests/data/realscale_plans by the script beside them (upstream's commands from the peer venv): the
comparison runs wherever the suite does, and its cost is ours alone.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.cli import main
from tests.helpers.paths import TEST_DATA
from tests.helpers.realscale_plans import CASES, DATASET, SLICES, make_dataset

# ~15 s on 2 idle cores (three 512 x 512 x 64 cases, a fingerprint of 1e8 samples)
pytestmark = pytest.mark.slow

UPSTREAM = TEST_DATA / "realscale_plans"


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _text(value: Any) -> list[str]:
    """One line per value as JSON prints it: key order and 1 vs 1.0 show in a comparison."""
    return json.dumps(value, indent=1).splitlines()


def _diff(ours: Any, theirs: Any) -> str:
    return "\n".join(difflib.unified_diff(_text(theirs), _text(ours), "upstream", "ours", n=2))


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Our preprocessed dataset folder (fingerprint and nnUNetPlans.json of the data) and
    upstream's stored files of the same data."""
    root = tmp_path_factory.mktemp("realscale_ct")
    make_dataset(root / "raw")
    roots = ["--raw", str(root / "raw"), "--preprocessed", str(root / "ours")]
    assert main(["fingerprint", "-d", DATASET, "-np", "2", *roots]) == 0
    assert main(["plan", "-d", DATASET, *roots]) == 0
    return root / "ours" / DATASET, UPSTREAM


def test_plans_equal_upstreams_with_the_cascade(planned: tuple[Path, Path]) -> None:
    ours, theirs = (_read(folder / "nnUNetPlans.json") for folder in planned)
    assert _text(ours) == _text(theirs), _diff(ours, theirs)
    configurations = list(theirs["configurations"])
    assert configurations == ["2d", "3d_lowres", "3d_fullres", "3d_cascade_fullres"]
    assert theirs["configurations"]["3d_fullres"]["normalization_schemes"] == ["CTNormalization"]


def test_fingerprint_equals_upstreams(planned: tuple[Path, Path]) -> None:
    ours, theirs = (_read(folder / "dataset_fingerprint.json") for folder in planned)
    assert ours == theirs, _diff(ours, theirs)
    sizes = [shape[0] for shape in theirs["shapes_after_crop"]]
    assert sizes == [SLICES] * CASES  # HU air is not zero: nothing is cropped, as for real CTs


def test_the_stored_files_come_from_the_script_beside_them() -> None:
    script = (UPSTREAM / "make_expected.py").read_text()
    assert "nnUNetv2_extract_fingerprint" in script and "nnUNetv2_plan_experiment" in script
    assert "make_dataset" in script  # the test's own data
