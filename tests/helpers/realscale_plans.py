"""The real-size CT-like dataset whose fingerprint and plans are compared with upstream's
(tests/parity/test_realscale_plans_parity.py; upstream's files: tests/data/realscale_plans)."""

from __future__ import annotations

from pathlib import Path

from nnunet_core.dataset.realscale import synthesize_realscale

DATASET_ID, DATASET = "955", "Dataset955_RealCT"
# 512 x 512 x 64: short enough to be cheap, long enough that both planners add 3d_lowres and the
# cascade, which needs 56 slices or more
CASES, SLICES = 3, 64


def make_dataset(raw_root: Path) -> str:
    """Write the seeded cases under ``raw_root``; returns the dataset id."""
    synthesize_realscale(raw_root / DATASET, "ct", CASES, 0, seed=0, slices=SLICES)
    return DATASET_ID
