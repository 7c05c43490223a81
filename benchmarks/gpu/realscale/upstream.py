"""Upstream's side of the real-size sections: its train step at the real patch, its loader feeding
that step (GPU busy), and ``nnUNetPredictor`` on the CT-like case.

Each runs in a child process of the Python that has nnunetv2 (``--peer VENV``, or this one with
the wheels of ``gpu_wheels.sh``), on the data our sections made: upstream reads our preprocessed
blosc2 arrays as they are (the layout is upstream's), with each case's properties pickled as
upstream stores them. Without nnunetv2 the rows say skipped.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.gpu.context import Context
from benchmarks.gpu.upstream import SKIP_REASON, run_peer, upstream_step

__all__ = ["SKIP_REASON", "upstream_busy", "upstream_predict", "upstream_real_step"]

# Runs in upstream's environment: only nnunetv2, torch and numpy, nothing of ours.
UPSTREAM_BUSY = r"""
import json, os, pickle, sys, time
spec = json.loads(sys.argv[1])
import numpy as np
import torch
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
os.makedirs(spec['target'], exist_ok=True)
for name in sorted(os.listdir(spec['source'])):  # our arrays, upstream's property pickles
    path = os.path.join(spec['source'], name)
    if name.endswith('.b2nd'):
        os.symlink(path, os.path.join(spec['target'], name))
    elif name.endswith('.json'):
        props = json.load(open(path))
        props['class_locations'] = {
            int(k) if k.lstrip('-').isdigit() else k: np.asarray(v, dtype=np.int64).reshape(-1, 4)
            for k, v in props['class_locations'].items()}
        with open(os.path.join(spec['target'], name[:-5] + '.pkl'), 'wb') as f:
            pickle.dump(props, f)
torch.backends.cudnn.benchmark = True  # as upstream's run_training
plans = json.load(open(spec['plans']))
plans['continue_training'] = False  # 2.8's trainer pops this key (its run_training sets it)
device = torch.device(spec['device'])
trainer = nnUNetTrainer(plans, '3d_fullres', 'all', spec['dataset_json'], device=device)
trainer.initialize()
trainer.network.train()
out = {}
for workers in spec['workers']:
    os.environ['nnUNet_n_proc_DA'] = str(workers)
    train, val = trainer.get_dataloaders()
    first = next(train)
    if not out:
        for _ in range(spec['warmup']):  # cuDNN's algorithm search before any clock
            trainer.train_step(first)
    for _ in range(max(6, workers // 2) + workers - 1):  # what was built before the clock
        next(train)
    wait, steps, start = 0.0, 0, time.perf_counter()
    while True:
        before = time.perf_counter()
        batch = next(train)
        wait += time.perf_counter() - before
        trainer.train_step(batch)  # returns the loss on the CPU: synchronised
        steps += 1
        if time.perf_counter() - start >= spec['seconds']:
            break
    if device.type == 'cuda':
        torch.cuda.synchronize()
    wall = time.perf_counter() - start
    out[str(workers)] = {'busy': (wall - wait) / wall, 'steps_per_s': steps / wall,
                         'wait_s': wait, 'compute_s': wall - wait, 'steps': steps}
    for augmenter in (train, val):
        if hasattr(augmenter, '_finish'):
            augmenter._finish()
from importlib.metadata import version
out['version'] = version('nnunetv2')
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)  # augmenter threads may linger
"""

UPSTREAM_PREDICT = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
import torch
from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
from nnunetv2.utilities.plans_handling.plans_handler import PlansManager
folder = spec['model']
plans = json.load(open(os.path.join(folder, 'plans.json')))
dataset_json = json.load(open(os.path.join(folder, 'dataset.json')))
manager = PlansManager(plans)
conf = manager.get_configuration('3d_fullres')
channels = determine_num_input_channels(manager, conf, dataset_json)
heads = manager.get_label_manager(dataset_json).num_segmentation_heads
net = nnUNetTrainer.build_network_architecture(manager, conf, channels, heads, True)
state = {'network_weights': net.state_dict(), 'trainer_name': 'nnUNetTrainer', 'current_epoch': 0,
         'init_args': {'plans': plans, 'configuration': '3d_fullres', 'fold': 0,
                       'dataset_json': dataset_json},
         'inference_allowed_mirroring_axes': tuple(range(len(conf.patch_size)))}
os.makedirs(os.path.join(folder, 'fold_0'), exist_ok=True)
torch.save(state, os.path.join(folder, 'fold_0', 'checkpoint_final.pth'))
device = torch.device(spec['device'])
out = {}
for label, mirror in (('off', False), ('on', True)):  # the first includes cuDNN's search
    predictor = nnUNetPredictor(0.5, True, mirror, device.type == 'cuda', device, False, False,
                                False)
    predictor.initialize_from_trained_model_folder(folder, (0,), 'checkpoint_final.pth')
    if device.type == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    target = os.path.join(spec['out'], label, 'case')
    os.makedirs(os.path.dirname(target), exist_ok=True)  # the sequential variant needs it
    if spec['processes']:
        predictor.predict_from_files([[spec['image']]], [target], False, True,
                                     spec['processes'], spec['processes'])
    else:  # no worker processes (as ours with 0): upstream's own sequential variant
        predictor.predict_from_files_sequential([[spec['image']]], [target], False, True)
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == 'cuda' else None
    out[label] = {'seconds': seconds, 'peak_mib': peak}
from importlib.metadata import version
out['version'] = version('nnunetv2')
print(json.dumps(out))
sys.stdout.flush()
os._exit(0)
"""


def upstream_real_step(ctx: Context, plans: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``train_step`` at the real plans' 3d_fullres patch (``upstream.py``'s child)."""
    real = ctx.profile.real
    profile = replace(ctx.profile, steps=real.steps, warmup=real.warmup)
    scratch = replace(ctx, profile=profile, plans=plans, work=ctx.work / "real_upstream_step")
    return upstream_step(scratch, "3d_fullres")


def upstream_busy(ctx: Context, data: dict[str, Any]) -> dict[str, Any]:
    """Upstream's loader in 4/8/12 workers feeding its step; results per worker count."""
    plans = data["plans"]
    identifier = plans["configurations"]["3d_fullres"]["data_identifier"]
    root = ctx.work / "real_upstream_busy"
    target = root / "preprocessed" / plans["dataset_name"] / identifier
    root.mkdir(parents=True, exist_ok=True)
    (root / "plans.json").write_text(json.dumps(plans))
    real = ctx.profile.real
    spec = {
        "source": str(data["preprocessed"] / data["name"] / identifier), "target": str(target),
        "plans": str(root / "plans.json"), "dataset_json": data["dataset_json"],
        "device": ctx.profile.device, "workers": list(real.workers), "warmup": real.warmup,
        "seconds": real.busy_seconds,
    }  # fmt: skip
    return run_peer(ctx, UPSTREAM_BUSY, spec, root)


def upstream_predict(ctx: Context, data: dict[str, Any], our_model: Path) -> dict[str, Any]:
    """``nnUNetPredictor`` on the CT-like case: a model folder of the same plans and dataset.json
    with upstream's own initial weights; mirroring off, then on (one run each)."""
    root = ctx.work / "real_upstream_predict"
    model = root / "model"
    model.mkdir(parents=True, exist_ok=True)
    for name in ("plans.json", "dataset.json"):
        (model / name).write_bytes((our_model / name).read_bytes())
    spec = {
        "model": str(model), "image": str(data["images"][0]), "out": str(root / "out"),
        "device": ctx.profile.device, "processes": ctx.profile.real.predict_processes,
    }  # fmt: skip
    return run_peer(ctx, UPSTREAM_PREDICT, spec, root)
