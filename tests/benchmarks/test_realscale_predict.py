"""The prediction stages of the real-scale benchmark run end to end (toy sizes, ours only).

``run_prediction_stages`` plans, preprocesses, writes one fold of random weights, then times the
export, one predicted case and the fold's final validation; without a peer the upstream figures
are None. Real sizes are the benchmark's job, not the suite's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.speed.realscale.predict import run_prediction_stages
from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset

pytestmark = pytest.mark.slow


def test_the_three_stages_run_without_a_peer(tmp_path: Path) -> None:
    raw = tmp_path / "Dataset901_Toy"
    options = SynthOptions(num_training=2, num_test=0, shape=(16, 48, 40), spacing=(2.5, 0.7, 0.7))
    synthesize_dataset(raw, options)
    lines: list[str] = []
    stages = run_prediction_stages(raw, tmp_path / "work", None, True, lines.append)
    assert sorted(stages) == ["predict_case", "predict_export", "validation_fold"]
    for name, stage in stages.items():
        assert stage["ours_s"] > 0 and stage["ours_peak_mb"] > 0, name
        assert stage["upstream_s"] is None and stage["ratio"] is None, name
        assert stage["note"], name
    work = tmp_path / "work" / "predict_stages"
    validation = next((work / "ours" / "results").glob("*/*/fold_0/validation"))
    # --quick validates one case (the other trains)
    assert sorted(p.name for p in validation.glob("*.npz")) == ["synth_000.npz"]
    assert (work / "predict_out" / "ours" / "synth_000.nii.gz").is_file()
    assert any("predict_export" in line for line in lines)
