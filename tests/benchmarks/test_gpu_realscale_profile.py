"""The GPU check's real-size profile is what issue 34 asks for, and fits the script's budget.

The dry run (test_gpu_check.py) runs the real-size sections at tiny sizes; what only the GPU
machine runs is the profile below. So check here, in milliseconds, that its sizes are the real
ones, that our planner gives the MR-like set the patch of about 128^3 with batch 2 that the step
and busy rows claim, and that all sections' budgets fit gpu_check.sh's cut.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.gpu.context import make_profile
from benchmarks.gpu.sections import SECTIONS
from nnunet_core.planning.planner import plan_experiment

ROOT = Path(__file__).resolve().parents[2]


def fingerprint(shape: tuple[int, ...], spacing: tuple[float, ...], cases: int) -> dict:
    """What our fingerprint of ``cases`` synthetic volumes of one shape says (intensities of a
    z-scored MR channel do not change the plan)."""
    intensities = {"max": 400.0, "mean": 120.0, "median": 118.0, "min": 1.0,
                   "percentile_00_5": 20.0, "percentile_99_5": 250.0, "std": 40.0}  # fmt: skip
    return {
        "foreground_intensity_properties_per_channel": {"0": intensities},
        "median_relative_size_after_cropping": 0.8,
        "shapes_after_crop": [list(shape)] * cases,
        "spacings": [list(spacing)] * cases,
    }


def dataset_json(channel: str) -> dict:
    return {"channel_names": {"0": channel}, "labels": {"background": 0, "organ": 1, "lesion": 2},
            "numTraining": 2, "file_ending": ".nii"}  # fmt: skip


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


def test_our_planner_gives_the_mr_like_set_a_128_cubed_patch_of_batch_2() -> None:
    real = make_profile(False, "cuda").real
    plans = plan_experiment(fingerprint(real.mr_shape, real.mr_spacing, 2), dataset_json("MR"),
                            "Dataset981_GpuRealMR")  # fmt: skip
    fullres = plans["configurations"]["3d_fullres"]
    assert fullres["patch_size"] == [128, 128, 128]
    assert fullres["batch_size"] == 2


def test_the_ct_like_case_plans_a_3d_fullres_network() -> None:
    real = make_profile(False, "cuda").real
    plans = plan_experiment(fingerprint(real.ct_shape, real.ct_spacing, 1), dataset_json("MR"),
                            "Dataset982_GpuRealCT")  # fmt: skip
    fullres = plans["configurations"]["3d_fullres"]
    assert fullres["spacing"] == list(real.ct_spacing)
    assert all(p <= s for p, s in zip(fullres["patch_size"], real.ct_shape, strict=True))
