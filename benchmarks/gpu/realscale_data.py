"""Real-size data for the GPU check, made on the machine (it has no network): an MR-like set
planned and preprocessed by our CLI, and one CT-like case with its plans.

The plans come from our planner on the fingerprint of these synthetic volumes (nothing is shipped):
256^3 at 1 mm plans a 3d_fullres patch of 128^3 with batch 2, as upstream plans it. ``--dry-run``
makes tiny volumes instead and cuts the planned 3d_fullres network to three stages of eight
features (``check.tiny_configuration``), so that the CPU runs the same steps in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.context import Context, cpu_count
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME, PLANS_SUFFIX
from nnunet_core.layout.raw import DATASET_JSON, TRAINING_FOLDERS

MR_DATASET = (981, "Dataset981_GpuRealMR")
CT_DATASET = (982, "Dataset982_GpuRealCT")
CONFIGURATION = "3d_fullres"
PLANS_FILE = DEFAULT_PLANS_NAME + PLANS_SUFFIX


def make_raw(
    target: Path, preset: str, cases: int, shape: tuple[int, ...], spacing: tuple[float, ...]
) -> list[list[int]]:
    """The one place that makes raw volumes: ``preset`` "mr" or "ct" of ``shape``/``spacing``.

    Until the real-size generator (``nnunet_core.dataset.realscale``) is merged this is the
    seeded phantom generator at real size (both presets are MR-like z-scored phantoms, one
    channel, organ + lesion; each case's shape varies by up to 12 %); uncompressed NIfTI, as
    writing gzip would take longer than everything measured here. Returns each case's shape.
    """
    from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset

    options = SynthOptions(num_training=cases, num_test=0, shape=shape, spacing=spacing,
                           seed=0, file_ending=".nii", name=f"GpuReal{preset.upper()}")  # fmt: skip
    return [list(case["shape"]) for case in synthesize_dataset(target, options, force=True)]


def cli(ctx: Context, *args: str) -> None:
    """``python -m nnunet_core ARGS``, as a user runs it; one line on failure."""
    command = [sys.executable, "-m", "nnunet_core", *args]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=max(1.0, ctx.time_left() - 1))  # fmt: skip
    if done.returncode != 0:
        msg = f"`nnunet-core {' '.join(args[:1])}` exited {done.returncode}: {done.stderr[-400:]}"
        raise RuntimeError(msg)


def plan(ctx: Context, dataset: tuple[int, str], roots: list[str]) -> dict[str, Any]:
    """Fingerprint and plan with our CLI; the dry run's 3d_fullres cut to a tiny network."""
    from benchmarks.gpu.check import tiny_configuration

    processes = str(min(8, cpu_count()))
    cli(ctx, "fingerprint", "-d", str(dataset[0]), *roots, "-np", processes)
    cli(ctx, "plan", "-d", str(dataset[0]), *roots)
    path = Path(roots[3]) / dataset[1] / PLANS_FILE
    plans = json.loads(path.read_text())
    if CONFIGURATION not in plans["configurations"]:
        msg = f"{path}: no {CONFIGURATION} planned for {dataset[1]}"
        raise RuntimeError(msg)
    if ctx.profile.dry_run:
        configurations = plans["configurations"]
        configurations[CONFIGURATION] = tiny_configuration(configurations[CONFIGURATION])
        path.write_text(json.dumps(plans, indent=1))
    return plans


def prepared(ctx: Context, preset: str) -> dict[str, Any]:
    """The preset's data, made once per run: raw and preprocessed roots, plans, seconds taken."""
    key = f"real_{preset}"
    if key in ctx.cache:
        return ctx.cache[key]
    real = ctx.profile.real
    dataset = MR_DATASET if preset == "mr" else CT_DATASET
    raw, pre = ctx.work / "real" / "raw", ctx.work / "real" / "preprocessed"
    roots = ["--raw", str(raw), "--preprocessed", str(pre)]
    start = time.perf_counter()
    if preset == "mr":
        shapes = make_raw(raw / dataset[1], preset, real.mr_cases, real.mr_shape, real.mr_spacing)
    else:
        shapes = make_raw(raw / dataset[1], preset, 1, real.ct_shape, real.ct_spacing)
    made = time.perf_counter() - start
    plans = plan(ctx, dataset, roots)
    if preset == "mr":  # the training sections read it preprocessed
        processes = str(min(real.mr_cases, cpu_count()))
        cli(ctx, "preprocess", "-d", str(dataset[0]), *roots, "-c", CONFIGURATION,
            "-np", processes, "--no-pbar")  # fmt: skip
    images = sorted((raw / dataset[1] / TRAINING_FOLDERS[0]).iterdir())
    ctx.cache[key] = {
        "name": dataset[1], "raw": raw, "preprocessed": pre, "plans": plans,
        "dataset_json": json.loads((raw / dataset[1] / DATASET_JSON).read_text()),
        "images": images, "shapes": shapes, "generate_s": made,
        "plan_s": time.perf_counter() - start - made,
    }  # fmt: skip
    return ctx.cache[key]


def describe(configuration: dict[str, Any]) -> str:
    """Patch, batch, stages and features of a planned configuration, for a row's note."""
    kwargs = configuration["architecture"]["arch_kwargs"]
    return (
        f"patch {configuration['patch_size']}, batch {configuration['batch_size']}, "
        f"{kwargs['n_stages']} stages, features {kwargs['features_per_stage'][0]}-"
        f"{kwargs['features_per_stage'][-1]}"
    )
