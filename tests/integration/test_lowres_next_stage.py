"""A 3d_lowres fold exports its validation cases for the cascade's next stage, and --val redoes it.

A tiny synthetic dataset planned with a small GPU memory target gets 3d_lowres (next stage
3d_cascade_fullres); one fold trains one epoch of one iteration in process, without test-time
mirroring (the small target's tiny patches make mirrored validation, done twice here, several
times slower; the export does not depend on it). Only 3d_lowres is preprocessed before
training, so the export computes the next stage's shape from the case's properties; 3d_fullres
is preprocessed afterwards, and each exported file must have exactly the shape of that case's
3d_fullres data (what the cascade stage will read it against).
"""

from __future__ import annotations

import json
from pathlib import Path

import blosc2
import numpy as np
import pytest

from nnunet_core import TrainerSettings
from nnunet_core.cli import main
from nnunet_core.layout.results import next_stage_file, trained_model_dir
from tests.helpers.training import roots_env, run_fold_in_process

pytestmark = pytest.mark.slow

DATASET = "Dataset991_Casc"
NEXT = "3d_cascade_fullres"
PREPROCESS = ["preprocess", "-d", "991", "-np", "1", "--no-pbar", "-c"]
TRAINER = "nnUNetTrainerNoMirroring"
SETTINGS = TrainerSettings(
    num_epochs=1, num_iterations=1, num_val_iterations=1, num_workers=0, trainer_name=TRAINER
)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cascade")
    make_raw_dataset(
        root / "raw" / DATASET,
        num_training=5,
        num_test=0,
        shape=(40, 48, 48),
        spacing=(1.0, 1.0, 1.0),
    )
    environment = roots_env(root)
    # the real commands in process: an interpreter start-up each costs seconds on 2 busy cores
    assert main(["fingerprint", "-d", "991", "-np", "1", *roots(environment)]) == 0
    assert main(["plan", "-d", "991", "-gpu_memory_target", "0.02", *roots(environment)]) == 0
    assert main([*PREPROCESS, "3d_lowres", *roots(environment)]) == 0
    return environment


def roots(env: dict[str, str]) -> list[str]:
    return ["--raw", env["nnUNet_raw"], "--preprocessed", env["nnUNet_preprocessed"]]


def run(env: dict[str, str], **flags) -> str:
    """Fold 0 of 3d_lowres in process, stdout captured."""
    return run_fold_in_process(
        env, env["nnUNet_results"], DATASET, "3d_lowres", 0, SETTINGS, **flags
    )


def test_lowres_fold_writes_and_val_rewrites_next_stage(env: dict[str, str]) -> None:
    preprocessed = Path(env["nnUNet_preprocessed"]) / DATASET
    plans = json.loads((preprocessed / "nnUNetPlans.json").read_text())
    assert plans["configurations"]["3d_lowres"]["next_stage"] == NEXT
    run(env)
    val_keys = json.loads((preprocessed / "splits_final.json").read_text())[0]["val"]
    model_dir = trained_model_dir(
        Path(env["nnUNet_results"]) / DATASET, "3d_lowres", "nnUNetPlans", TRAINER
    )
    files = {case: next_stage_file(model_dir, NEXT, case) for case in val_keys}
    assert sorted(p.name for p in files[val_keys[0]].parent.iterdir()) == sorted(
        f"{case}.b2nd" for case in val_keys
    )  # this fold's validation cases, nothing else, no temporaries

    assert main([*PREPROCESS, "3d_fullres", *roots(env)]) == 0
    fullres = preprocessed / plans["configurations"]["3d_fullres"]["data_identifier"]
    first = {}
    for case, path in files.items():
        stored = blosc2.open(str(path), mode="r")
        assert stored.dtype == np.uint8
        assert stored.shape == blosc2.open(str(fullres / f"{case}.b2nd")).shape[1:]
        first[case] = (stored[:], path.stat().st_mtime_ns)
        assert set(np.unique(first[case][0])) <= {0, 1, 2}

    run(env, validate_only=True)
    for case, path in files.items():
        assert path.stat().st_mtime_ns != first[case][1]  # written again
        assert np.array_equal(blosc2.open(str(path), mode="r")[:], first[case][0])
