"""The GPU check's prediction-mode section (issue 47): one shard job on the GPU, as the workflow
runs it (``python -m nnunet_core.new_scans.shard``; Snakemake only starts it), over a few cases of
the predict section's size, with a model folder of the reference plans' 3d_fullres network
(random weights: the GPU's work is the same). Rows: the job's seconds, cases per hour, and how
busy the GPU was (the network's seconds over the job's, as the job's log says), which upstream's
users find under 50 % (#2655) when reading and export starve it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.gpu.context import Context, Row, guarded

CONFIGURATION = "3d_fullres"
BUSY_LINE = re.compile(r"the network ran ([0-9.]+) s of the job's ([0-9.]+) s")
LABELS = {"background": 0, "organ": 1, "lesion": 2}


def model_folder(ctx: Context, root: Path) -> Path:
    """A trained-looking model folder: the check's plans, dataset.json, fold 0 random weights."""
    from nnunet_core.io.plans import Plans
    from nnunet_core.model import build_network
    from nnunet_core.model import checkpoint as ckpt

    dataset_json = {"channel_names": {"0": "CT"}, "labels": LABELS, "numTraining": 1,
                    "file_ending": ".nii.gz"}  # fmt: skip
    folder = root / "Dataset978_GpuCheck" / f"nnUNetTrainer__nnUNetPlans__{CONFIGURATION}"
    folder.mkdir(parents=True)
    (folder / "plans.json").write_text(json.dumps(ctx.plans))
    (folder / "dataset.json").write_text(json.dumps(dataset_json))
    configuration = Plans(ctx.plans).configuration(CONFIGURATION)
    torch.manual_seed(0)
    network = build_network(configuration, 1, len(LABELS), True)
    state = {"network_weights": network.state_dict(), "trainer_name": "nnUNetTrainer",
             "init_args": {"plans": ctx.plans, "configuration": CONFIGURATION, "fold": 0,
                           "dataset_json": dataset_json, "device": "cpu"},
             "inference_allowed_mirroring_axes": [0, 1, 2], "current_epoch": 1}  # fmt: skip
    ckpt.save_checkpoint(state, folder / "fold_0" / ckpt.FINAL)
    return folder


def write_scans(folder: Path, count: int, shape: tuple[int, int, int]) -> Path:
    import SimpleITK as sitk

    folder.mkdir(parents=True)
    generator = np.random.default_rng(0)
    for index in range(count):
        volume = generator.normal(0, 100, shape).astype(np.int16)
        image = sitk.GetImageFromArray(volume)
        image.SetSpacing((0.8, 0.8, 2.5))
        sitk.WriteImage(image, str(folder / f"scan_{index:03d}_0000.nii.gz"))
    return folder


def shard_rows(ctx: Context) -> list[Row]:
    from nnunet_core.new_scans.plan import plan_run

    cases = 2 if ctx.profile.dry_run else 3
    root = ctx.work / "new_scans"
    model = model_folder(ctx, root / "results")
    scans = write_scans(root / "scans", cases, ctx.profile.predict_shape)
    predict = {"model": str(model), "input": str(scans), "output": str(root / "out"),
               "cases_per_job": cases, "use_mirroring": False,
               "device": ctx.profile.device}  # fmt: skip
    run = plan_run(predict, root / "work")
    (shard,) = run.shards
    command = [sys.executable, "-m", "nnunet_core.new_scans.shard", str(run.folder), shard]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=ctx.time_left())
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the shard job failed: {(done.stdout + done.stderr)[-400:]}")
    match = BUSY_LINE.search(done.stdout)
    if match is None:
        raise RuntimeError(f"no busy line in the job's output: {done.stdout[-400:]}")
    network, job = float(match.group(1)), float(match.group(2))
    note = f"{cases} cases of {list(ctx.profile.predict_shape)}, mirroring off, one shard job"
    return [
        Row("new_scans", "shard job: wall", wall, "s", note + " (process start included)"),
        Row("new_scans", "shard job: cases per hour", cases * 3600 / wall, "cases/h", note),
        Row("new_scans", "shard job: GPU busy", network / job, "fraction",
            f"network {network:.1f} s of the job's {job:.1f} s (after its imports)"),
    ]  # fmt: skip


def new_scans_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "new_scans", "shard job", lambda: shard_rows(ctx))
    return rows


NEW_SCANS_SECTIONS = {"new_scans": new_scans_section}
