"""benchmarks/peer_trainer.py: the upstream trainer classes the benchmarks write into the peer
venv, including the swap of issue 12 (upstream's trainer with our training transforms). The swap
runs in the peer venv (upstream's loader workers unpickle its transform class), so the test that
builds it there skips without that venv."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
from benchmark_modules import load_benchmark
from peer_helpers import HAS_PEER, PEER_BIN

pt = load_benchmark("peer_trainer")
REPO = Path(__file__).resolve().parents[2]


def test_the_swap_adds_our_transforms_and_only_when_asked() -> None:
    plain = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w")
    swap = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_augmentation=True)
    for source in (plain, swap):
        compile(source, "trainer.py", "exec")
        assert "class T5x10v3(nnUNetTrainer):" in source
        assert "self.num_iterations_per_epoch = 10" in source
    assert "get_training_transforms" not in plain and "nnunet_core" not in plain
    # the transform class at module level: upstream's worker processes unpickle it by name
    assert "\nclass OurTrainingTransforms:" in swap
    assert swap.index("class OurTrainingTransforms") < swap.index("class T5x10v3")
    assert "def get_training_transforms(" in swap


CHECK = textwrap.dedent(
    """
    import json
    import numpy as np, torch
    from trainer_under_test import T5x10v3
    pipeline = T5x10v3.get_training_transforms(
        (16, 20, 20), (-0.5, 0.5), [[1, 1, 1], [0.5, 0.5, 0.5]], (0, 1, 2), False,
        use_mask_for_norm=[True], is_cascaded=False, foreground_labels=[1, 2])
    image = torch.from_numpy(np.random.default_rng(0).normal(size=(1, 24, 28, 28)).astype("f4"))
    seg = torch.zeros((1, 24, 28, 28), dtype=torch.int16)
    seg[:, :4] = -1  # outside the nonzero mask
    seg[:, 8:16, 10:18, 10:18] = 1
    seg[:, 11:13, 13:15, 13:15] = 2
    out = pipeline(image=image, segmentation=seg)
    full, half = out["segmentation"]
    print(json.dumps({"image": list(out["image"].shape), "full": list(full.shape),
                      "half": list(half.shape), "labels": sorted(int(v) for v in full.unique())}))
    """
)


@pytest.mark.skipif(not HAS_PEER, reason="upstream's peer venv is not set up")
def test_the_swapped_pipeline_runs_in_upstreams_venv_and_gives_upstreams_shapes(
    tmp_path: Path,
) -> None:
    source = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_augmentation=True)
    (tmp_path / "trainer_under_test.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "nnUNet_compile": "false"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([str(PEER_BIN / "python"), "-c", CHECK], env=env, capture_output=True,
                          text=True, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    shapes = json.loads(done.stdout.strip().splitlines()[-1])
    # the final patch and upstream's deep-supervision list, as upstream's own pipeline gives
    assert shapes["image"] == shapes["full"] == [1, 16, 20, 20]
    assert shapes["half"] == [1, 8, 10, 10]
    assert shapes["labels"][0] == 0 and set(shapes["labels"]) <= {0, 1, 2}  # -1 became 0
