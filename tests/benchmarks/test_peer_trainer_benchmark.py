"""benchmarks/common/peer/trainer.py: the upstream trainer classes the benchmarks write into the
peer venv, including the swaps of issue 12 (upstream's trainer with our training transforms, or with
our whole loaders). The swaps run in the peer venv (upstream's loader workers unpickle the transform
class), so the tests that build them there skip without that venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from benchmarks.common.peer import trainer as pt
from tests.helpers.peer import HAS_PEER, PEER_BIN

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
    assert "get_dataloaders" not in swap


def test_the_loader_swap_replaces_upstreams_loaders_and_only_when_asked() -> None:
    plain = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w")
    swap = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_loader=True)
    compile(swap, "trainer.py", "exec")
    assert "get_dataloaders" not in plain
    assert "\nclass OurBatches:" in swap and "def get_dataloaders(self):" in swap
    assert "NNUNET_CORE_SWAP_DATA" in swap
    assert "get_training_transforms" not in swap  # our loader applies our transforms itself


def test_the_init_swap_keeps_upstreams_loaders_and_loads_our_start() -> None:
    init = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_init=True)
    compile(init, "trainer.py", "exec")
    assert "NNUNET_CORE_SWAP_INIT" in init and "return super().get_dataloaders()" in init
    assert "OurBatches" not in init and "NNUNET_CORE_SWAP_DATA" not in init
    both = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_loader=True, our_init=True)
    assert both.count("def get_dataloaders(self):") == 1  # the loader swap reads the start itself


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


LOADERS = textwrap.dedent(
    """
    import json, sys, types
    from pathlib import Path
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
    from trainer_under_test import T5x10v3
    folder, upstream_folder = Path(sys.argv[1]), sys.argv[2]
    manager = PlansManager(json.loads((folder.parent / "nnUNetPlans.json").read_text()))
    keys = sorted(p.name[:-len("_seg.b2nd")] for p in folder.glob("*_seg.b2nd"))
    trainer = types.SimpleNamespace(  # the attributes of upstream's trainer the method reads
        configuration_manager=manager.get_configuration("3d_fullres"), batch_size=2, fold=0,
        preprocessed_dataset_folder=upstream_folder, do_split=lambda: (keys[:-1], keys[-1:]),
        print_to_log_file=print, num_iterations_per_epoch=3, num_val_iterations_per_epoch=2)
    train, val = T5x10v3.get_dataloaders(trainer)
    batches = [next(train) for _ in range(4)]
    val_keys = sorted({k for _ in range(2) for k in next(val)["keys"]})
    print(json.dumps({
        "dataset_class": trainer.dataset_class.__name__,
        "data": list(batches[0]["data"].shape),
        "targets": [list(t.shape) for t in batches[0]["target"]],
        "positions": [train.t, val.t],
        "val_keys": val_keys,
    }))
    """
)


@pytest.mark.skipif(not HAS_PEER, reason="upstream's peer venv is not set up")
def test_the_loader_swap_feeds_upstreams_trainer_our_batches(
    make_preprocessed_dataset, tmp_path: Path
) -> None:
    pre = make_preprocessed_dataset(tmp_path, "Dataset902_Swap", "3d_fullres", num_training=4)
    plans = json.loads((pre / "nnUNetPlans.json").read_text())
    config = plans["configurations"]["3d_fullres"]
    folder = pre / config["data_identifier"]
    # upstream's own folder of the cases, which the method only inspects for its file type
    upstream_folder = tmp_path / "upstream" / config["data_identifier"]
    upstream_folder.mkdir(parents=True)
    shutil.copy(folder / "synth_000.b2nd", upstream_folder)
    source = pt.trainer_source("T5x10v3", 5, 10, 3, writer="w", our_loader=True)
    (tmp_path / "trainer_under_test.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}", "nnUNet_compile": "false",
           "NNUNET_CORE_SWAP_DATA": str(folder)}  # fmt: skip
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([str(PEER_BIN / "python"), "-c", LOADERS, str(folder),
                           str(upstream_folder)], env=env,
                          capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    patch = config["patch_size"]
    assert found["dataset_class"] == "nnUNetDatasetBlosc2"  # what on_train_start unpacks
    assert found["data"] == [2, 1, *patch]
    # one target per deep-supervision output, full resolution first, halved by each stride
    assert found["targets"][0] == [2, 1, *patch]
    assert len(found["targets"]) == len(config["architecture"]["arch_kwargs"]["strides"]) - 1
    assert found["positions"] == [4, 2]  # the 4th batch is (epoch 1, iteration 0)
    assert found["val_keys"] == ["synth_003"]
