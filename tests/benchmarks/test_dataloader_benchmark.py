"""benchmarks/speed/dataloader/'s parts: where our loader's time goes (a cProfile of real
batches), upstream's per-transform timing, and the split that lets upstream load fewer than five
cases."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks.common.our_loader import build_ours
from benchmarks.speed.dataloader import run as bench
from benchmarks.speed.dataloader.parts import PEER_TIMING, our_parts, profile_batches
from tests.helpers.peer import HAS_PEER, PEER_BIN


def test_our_breakdown_accounts_for_the_batch(make_preprocessed_dataset, tmp_path) -> None:
    """Every named part is found in a real profile, none is counted twice (the remainders stay
    >= 0) and they add up to the batch; the augmentation reads the patch inside its pipeline."""
    folder = make_preprocessed_dataset(tmp_path, "Dataset979_LoaderParts", "3d_fullres")
    loader = build_ours(folder, "3d_fullres")
    stats = profile_batches(loader, list(range(4)))
    parts = our_parts(stats, 4)
    assert parts["read patch (blosc2)"] > 0 and parts["spatial transform"] > 0
    assert parts["deep-supervision targets"] > 0 and parts["locate (case, box)"] > 0
    assert parts["rest of the pipeline"] >= 0 and parts["batch assembly, other"] >= 0
    summed = sum(v for k, v in parts.items() if k != "total")
    assert summed == pytest.approx(parts["total"])


def test_upstream_split_trains_fold_0_on_every_case(tmp_path) -> None:
    plans = tmp_path / "nnUNetPlans_3d_fullres"
    plans.mkdir()
    for case in ("mr_001", "mr_000", "mr_002"):
        (plans / f"{case}.b2nd").touch()
        (plans / f"{case}_seg.b2nd").touch()
    bench.write_peer_split(tmp_path)
    split = json.loads((tmp_path / "splits_final.json").read_text())
    assert len(split) == 5 and split[0] == {
        "train": ["mr_000", "mr_001", "mr_002"],
        "val": ["mr_000"],
    }


@pytest.mark.skipif(not HAS_PEER, reason="needs the upstream peer venv")
def test_upstream_timing_times_each_transform_once() -> None:
    """Each transform's own time (the composed and random wrappers exclude what they wrap): the
    leaves are named and the times add up to no more than the pipeline's wall time."""
    script = (
        PEER_TIMING
        + r"""
import json, time, torch
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
patch = (16, 20, 24)
pipeline = nnUNetTrainer.get_training_transforms(patch, (-0.5, 0.5), None, (0, 1, 2), False)
start = time.perf_counter()
for _ in range(5):
    pipeline(image=torch.randn(1, 24, 28, 32), segmentation=torch.randint(0, 3, (1, 24, 28, 32)))
print(json.dumps({"wall": time.perf_counter() - start, "spent": SPENT}))
"""
    )
    done = subprocess.run(
        [str(PEER_BIN / "python"), "-c", "import time\n" + script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    spent = record["spent"]
    assert {"SpatialTransform", "MirrorTransform", "ComposeTransforms"} <= set(spent)
    assert all(v >= 0 for v in spent.values())
    assert sum(spent.values()) <= record["wall"] * 1.01
    assert spent["ComposeTransforms"] < spent["SpatialTransform"]  # the wrapper's own time only
