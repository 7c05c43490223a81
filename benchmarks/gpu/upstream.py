"""Upstream's train step (nnunetv2's own ``nnUNetTrainer.train_step``) on the same plans.

It runs in a child process of the Python that has nnunetv2: ``--peer VENV``, or this Python when
the wheels from ``gpu_wheels.sh`` are installed. Without either the rows say so (skipped). The
child builds upstream's trainer from the plans and a dataset.json in a scratch nnU-Net tree, and
times ``train_step`` on random data of the plan's batch and patch size, like ours.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

SKIP_REASON = "skipped: nnunetv2 not importable here (carry upstream wheels, or --peer VENV)"

# Runs in upstream's environment: only nnunetv2 and torch, nothing of ours.
UPSTREAM_STEP = r"""
import json, os, statistics, sys, time
spec = json.loads(sys.argv[1])
import torch
import torch.nn.functional as F
torch.set_num_threads(spec['threads'])  # as ours: a loaded CI machine punishes oversubscription
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
plans = json.load(open(spec['plans']))
plans['continue_training'] = False  # 2.8's trainer pops this key (its run_training sets it)
device = torch.device(spec['device'])
trainer = nnUNetTrainer(plans, spec['configuration'], 0, spec['dataset_json'], device=device)
trainer.initialize()
patch = [int(p) for p in trainer.configuration_manager.patch_size]
batch, channels = trainer.batch_size, trainer.num_input_channels
heads = trainer.label_manager.num_segmentation_heads
generator = torch.Generator().manual_seed(0)
data = torch.randn((batch, channels, *patch), generator=generator)
seg = torch.randint(0, heads, (batch, 1, *patch), generator=generator).float()
targets = [F.interpolate(seg, size=[max(1, round(p * s)) for p, s in zip(patch, scale)])
           for scale in trainer._get_deep_supervision_scales()]
trainer.network.train()
times = []
for i in range(spec['warmup'] + spec['steps']):
    start = time.perf_counter()
    trainer.train_step({'data': data, 'target': targets})
    if device.type == 'cuda':
        torch.cuda.synchronize()
    if i >= spec['warmup']:
        times.append(time.perf_counter() - start)
peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == 'cuda' else None
import nnunetv2
from importlib.metadata import version
print(json.dumps({'median': statistics.median(times), 'batch': batch, 'patch': patch,
                  'params': sum(p.numel() for p in trainer.network.parameters()),
                  'peak_mib': peak, 'version': version('nnunetv2')}))
sys.stdout.flush()
os._exit(0)  # upstream's trainer may leave threads behind
"""


def peer_python(peer: Path | None) -> str | None:
    """The Python that runs upstream: the ``--peer`` venv's, else ours if it has nnunetv2."""
    if peer is not None:
        python = peer / "bin" / "python"
        return str(python) if python.is_file() else None
    return sys.executable if importlib.util.find_spec("nnunetv2") is not None else None


def scratch_tree(ctx: Any) -> tuple[Path, dict[str, Any], dict[str, str]]:
    """Plans file, dataset.json and nnU-Net folders in which upstream's trainer initialises."""
    from benchmarks.common.random_training import LABELS
    from nnunet_core.io.plans import Plans

    root = ctx.work / "upstream"
    name = ctx.plans.get("dataset_name", "Dataset900_Synth")
    channels = len(Plans(ctx.plans).configuration("3d_fullres").normalization_schemes)
    dataset_json = {
        "channel_names": {str(c): f"ch{c}" for c in range(channels)},
        "labels": LABELS, "numTraining": 1, "file_ending": ".nii.gz",
    }  # fmt: skip
    for configuration in ctx.plans["configurations"].values():
        identifier = configuration.get("data_identifier")
        if identifier:  # upstream picks its dataset class from the files it finds there
            folder = root / "preprocessed" / name / identifier
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "case.b2nd").touch()
    plans = root / "plans.json"
    plans.write_text(json.dumps(ctx.plans))
    return plans, dataset_json, root


def upstream_step(ctx: Any, configuration: str) -> dict[str, Any]:
    plans, dataset_json, root = scratch_tree(ctx)
    spec = {
        "plans": str(plans), "configuration": configuration, "dataset_json": dataset_json,
        "device": ctx.profile.device, "steps": ctx.profile.steps, "warmup": ctx.profile.warmup,
        "threads": torch.get_num_threads(),
    }  # fmt: skip
    return run_peer(ctx, UPSTREAM_STEP, spec, root)


def run_peer(ctx: Any, script: str, spec: dict[str, Any], root: Path) -> dict[str, Any]:
    """The script's JSON (its last line), run by upstream's Python with its own nnU-Net roots
    under ``root``, within what is left of the check's budget."""
    env = {
        **os.environ,
        "nnUNet_raw": str(root / "raw"),
        "nnUNet_preprocessed": str(root / "preprocessed"),
        "nnUNet_results": str(root / "results"),
        "nnUNet_compile": "false",
    }
    done = subprocess.run(
        [str(ctx.peer_python), "-c", script, json.dumps(spec)],
        env=env, capture_output=True, text=True, timeout=max(1.0, ctx.time_left() - 1),
    )  # fmt: skip
    if done.returncode != 0:
        msg = f"upstream exited {done.returncode}: {done.stderr.strip()[-400:]}"
        raise RuntimeError(msg)
    return json.loads(done.stdout.strip().splitlines()[-1])


def upstream_step_rows(ctx: Any, configuration: str) -> list:
    from benchmarks.gpu.context import Row

    what = f"upstream {configuration} step"
    if ctx.peer_python is None:
        return [Row("train", what, None, "", SKIP_REASON)]
    result = upstream_step(ctx, configuration)
    note = (
        f"nnunetv2 {result['version']}, median of {ctx.profile.steps}; batch x patch "
        f"{[result['batch'], *result['patch']]}, {result['params']:,} params"
    )
    if result["peak_mib"] is not None:
        note += f", peak {result['peak_mib']:.0f} MiB"
    ours = ctx.step_seconds.get(configuration)
    if ours:
        note += f"; ours/upstream {ours / result['median']:.2f}"
    return [Row("train", what, result["median"], "s", note)]
