"""The real-size CT preset is planned by upstream nnU-Net 2.8.1 exactly as by us.

Three CT-like cases of ``synthesize --preset ct`` (512 x 512 x 64: short enough to be cheap, long
enough that both planners add 3d_lowres and the cascade, which needs 56 slices or more) go
through upstream's ``nnUNetv2_extract_fingerprint`` and ``nnUNetv2_plan_experiment`` in the peer
venv and through ours; the fingerprints and the nnUNetPlans.json files must be equal, key order
and number types included. Skipped where the peer venv is absent (a failure under
NNUNET_REQUIRE_PEER=1).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.cli import main
from nnunet_core.dataset.realscale import synthesize_realscale
from tests.helpers.peer import HAS_PEER, upstream
from tests.helpers.training import roots_env

# ~40 s on 2 idle cores (upstream's start-up, two fingerprints of 1e7 samples each)
pytestmark = pytest.mark.slow

DATASET_ID, DATASET = "955", "Dataset955_RealCT"
CASES, SLICES = 3, 64


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _text(value: Any) -> list[str]:
    """One line per value as JSON prints it: key order and 1 vs 1.0 show in a comparison."""
    return json.dumps(value, indent=1).splitlines()


def _diff(ours: Any, theirs: Any) -> str:
    return "\n".join(difflib.unified_diff(_text(theirs), _text(ours), "upstream", "ours", n=2))


@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The preprocessed dataset folders of ours and upstream's, each holding the fingerprint and
    nnUNetPlans.json of the same raw data."""
    root = tmp_path_factory.mktemp("realscale_ct")
    synthesize_realscale(root / "raw" / DATASET, "ct", CASES, 0, seed=0, slices=SLICES)
    theirs = {**roots_env(root), "nnUNet_preprocessed": str(root / "upstream")}
    upstream(theirs, "nnUNetv2_extract_fingerprint", "-d", DATASET_ID, "-np", "2")
    upstream(theirs, "nnUNetv2_plan_experiment", "-d", DATASET_ID)
    roots = ["--raw", str(root / "raw"), "--preprocessed", str(root / "ours")]
    assert main(["fingerprint", "-d", DATASET, "-np", "2", *roots]) == 0
    assert main(["plan", "-d", DATASET, *roots]) == 0
    return root / "ours" / DATASET, root / "upstream" / DATASET


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv (upstream nnU-Net) here")
def test_plans_equal_upstreams_with_the_cascade(planned: tuple[Path, Path]) -> None:
    ours, theirs = (_read(folder / "nnUNetPlans.json") for folder in planned)
    assert _text(ours) == _text(theirs), _diff(ours, theirs)
    configurations = list(theirs["configurations"])
    assert configurations == ["2d", "3d_lowres", "3d_fullres", "3d_cascade_fullres"]
    assert theirs["configurations"]["3d_fullres"]["normalization_schemes"] == ["CTNormalization"]


@pytest.mark.skipif(not HAS_PEER, reason="no peer venv (upstream nnU-Net) here")
def test_fingerprint_equals_upstreams(planned: tuple[Path, Path]) -> None:
    ours, theirs = (_read(folder / "dataset_fingerprint.json") for folder in planned)
    assert ours == theirs, _diff(ours, theirs)
    sizes = [shape[0] for shape in theirs["shapes_after_crop"]]
    assert sizes == [SLICES] * CASES  # HU air is not zero: nothing is cropped, as for real CTs
