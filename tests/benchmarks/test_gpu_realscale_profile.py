"""The GPU check's real-size profile is what issue 34 asks for, and fits the script's budget.

The dry run (test_gpu_check.py) runs the real-size sections at tiny sizes; what only the GPU
machine runs is the profile and the shipped plans below. So check here, in about a second, that its
sizes are the real ones, that the shipped plans are what our planner makes of their fingerprint
(a patch of about 128^3 voxels and batch 2 for the MR-like set, as the step and busy rows
claim), and that all
sections' budgets fit gpu_check.sh's cut.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from benchmarks.gpu.context import make_profile
from benchmarks.gpu.realscale.data import DATASETS, PLANS_DIR, PLANS_FILE
from benchmarks.gpu.sections import SECTIONS
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.planning.planner import plan_experiment

ROOT = Path(__file__).resolve().parents[2]


def shipped(preset: str, name: str) -> dict:
    return json.loads((PLANS_DIR / preset / name).read_text())


def test_gpu_profile_has_the_real_sizes_and_fits_the_budget() -> None:
    profile = make_profile(False, "cuda")
    real = profile.real
    assert real.mr_shape == (256, 256, 256) and real.mr_spacing == (1.0, 1.0, 1.0)
    assert real.ct_shape[1:] == (512, 512) and real.ct_spacing == (2.5, 0.7, 0.7)
    assert real.workers == (4, 8, 12)
    assert set(profile.budgets) == set(SECTIONS)
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    cut = int(re.search(r"GPU_CHECK_BUDGET_S:-(\d+)", script).group(1))
    # every section stops at its own budget: their sum, plus start-up, stays inside the cut
    assert sum(profile.budgets.values()) + 20 <= cut, profile.budgets
    for name, seconds in profile.budgets.items():  # the header states each budget
        assert f"{name} {seconds}" in script, name


@pytest.mark.parametrize("preset", ["mr", "ct"])
def test_shipped_plans_are_our_planners_for_their_fingerprint(preset: str) -> None:
    fingerprint = shipped(preset, FINGERPRINT_JSON)
    plans = plan_experiment(fingerprint, shipped(preset, DATASET_JSON), DATASETS[preset][1])
    assert plans == shipped(preset, PLANS_FILE)
    real = make_profile(False, "cuda").real
    shape, spacing = (real.mr_shape, real.mr_spacing) if preset == "mr" else (
        real.ct_shape, real.ct_spacing)  # fmt: skip
    # the fingerprint is of volumes of the profile's size (the generator varies them a little)
    for case_spacing in fingerprint["spacings"]:
        assert case_spacing == pytest.approx(spacing, rel=0.09)
    for case_shape in fingerprint["shapes_after_crop"]:
        assert all(0.5 * n <= m <= 1.13 * n for m, n in zip(case_shape, shape, strict=True))


def test_the_mr_like_set_plans_a_patch_of_about_128_cubed_and_batch_2() -> None:
    fullres = shipped("mr", PLANS_FILE)["configurations"]["3d_fullres"]
    patch = fullres["patch_size"]
    assert len(patch) == 3 and all(96 <= p <= 192 for p in patch), patch
    assert 0.75 <= math.prod(patch) / 128**3 <= 1.25, patch
    assert fullres["batch_size"] == 2
