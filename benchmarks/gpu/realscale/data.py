#!/usr/bin/env python
"""Real-size data for the GPU check, made on the machine (it has no network), and its plans.

The plans are shipped (``tests/data/plans/gpu_realscale/{mr,ct}/``): our planner's, from our
fingerprint of synthetic real-size volumes, written once by

    python -m benchmarks.gpu.realscale.data --write-plans

since the GPU machine has no image library (SimpleITK does not fit the 64 MiB the device tool
carries, ``gpu_wheels.sh``) and our planner reads images. Two phantoms of 256^3 at 1 mm (the body
cropped to about 170x228x205) plan a 3d_fullres patch of 112x160x128 (about 128^3) with batch 2;
the CT-like case 40x256x192, batch 2. On the machine, the MR-like set is drawn in memory
and stored as our preprocessor stores a case at its target spacing (crop to the body, normalise
with the plans' scheme, class locations, blosc2), so no image file is read or written; the CT-like
case to predict is a raw image file, written where SimpleITK is importable (else its rows say
skipped). ``--dry-run`` draws tiny volumes and cuts the planned 3d_fullres network to three stages
of eight features (``context.tiny_configuration``), so that the CPU runs the same steps in seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.gpu.context import ROOT, Context, cpu_count, tiny_configuration
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME, FINGERPRINT_JSON, PLANS_SUFFIX
from nnunet_core.layout.raw import DATASET_JSON, TRAINING_FOLDERS

PLANS_DIR = ROOT / "tests" / "data" / "plans" / "gpu_realscale"
DATASETS = {"mr": (981, "Dataset981_GpuRealMR"), "ct": (982, "Dataset982_GpuRealCT")}
CONFIGURATION = "3d_fullres"
PLANS_FILE = DEFAULT_PLANS_NAME + PLANS_SUFFIX
FOREGROUND = [1, 2]  # organ, lesion


def make_raw(
    target: Path, preset: str, cases: int, shape: tuple[int, ...], spacing: tuple[float, ...]
) -> list[list[int]]:
    """The one place that makes raw volumes: ``preset`` "mr" or "ct" of ``shape``/``spacing``.

    Until the real-size generator (``nnunet_core.dataset.realscale``) is merged this is the
    seeded phantom generator at real size (both presets are MR-like phantoms, one channel,
    organ + lesion; each case's shape and spacing vary by up to 12 and 8 %); uncompressed
    NIfTI, as gzip would take longer than what is measured. Returns each case's shape.
    """
    from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset

    options = SynthOptions(num_training=cases, num_test=0, shape=shape, spacing=spacing,
                           seed=0, file_ending=".nii", name=f"GpuReal{preset.upper()}")  # fmt: skip
    return [list(case["shape"]) for case in synthesize_dataset(target, options, force=True)]


def shipped(preset: str, dry_run: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The preset's plans and dataset.json; the dry run's 3d_fullres cut to a tiny network."""
    plans = json.loads((PLANS_DIR / preset / PLANS_FILE).read_text())
    if dry_run:
        configurations = plans["configurations"]
        configurations[CONFIGURATION] = tiny_configuration(configurations[CONFIGURATION])
    return plans, json.loads((PLANS_DIR / preset / DATASET_JSON).read_text())


def image_io_missing() -> str | None:
    """Why raw image files cannot be read or written here, or None."""
    if importlib.util.find_spec("SimpleITK") is None:
        return "skipped: SimpleITK not importable here (reading and writing images needs it)"
    return None


# ------------------------------------------------------------------------------- MR-like set
def store_mr_case(spec: dict[str, Any]) -> None:
    """One phantom drawn at the plans' target spacing and stored as our preprocessor stores a
    case there (nothing to resample)."""
    from nnunet_core.dataset.shapes import make_phantom
    from nnunet_core.io.blosc2_store import save_case
    from nnunet_core.io.plans import Plans
    from nnunet_core.preprocessing.cropping import crop_to_nonzero
    from nnunet_core.preprocessing.foreground import locations_to_json, sample_class_locations
    from nnunet_core.preprocessing.normalization import normalize

    plans = Plans(spec["plans"])
    conf = plans.configuration(CONFIGURATION)
    rng = np.random.default_rng(np.random.SeedSequence([0, spec["index"]]))
    phantom = make_phantom(rng, tuple(spec["shape"]), 1)
    seg = phantom.label[None].astype(np.int16)
    data, seg, bbox = crop_to_nonzero(phantom.images.astype(np.float32), seg)
    del phantom
    normalize(data, seg, conf.normalization_schemes, conf.use_mask_for_norm,
              plans.foreground_intensity_properties, spec["case"])  # fmt: skip
    properties = {
        "spacing": list(conf.spacing), "shape_before_cropping": list(spec["shape"]),
        "bbox_used_for_cropping": bbox, "shape_after_cropping_and_before_resampling":
        list(data.shape[1:]),
        "class_locations": locations_to_json(sample_class_locations(seg, FOREGROUND)),
    }  # fmt: skip
    save_case(Path(spec["folder"]), spec["case"], data, seg, properties, list(conf.patch_size))


def mr_dataset(ctx: Context) -> dict[str, Any]:
    """The preprocessed MR-like set (made once per run): its name, roots, plans, seconds taken."""
    if "real_mr" in ctx.cache:
        return ctx.cache["real_mr"]
    start = time.perf_counter()
    real = ctx.profile.real
    plans, dataset_json = shipped("mr", ctx.profile.dry_run)
    name = DATASETS["mr"][1]
    pre = ctx.work / "real" / "preprocessed"
    folder = pre / name / plans["configurations"][CONFIGURATION]["data_identifier"]
    folder.mkdir(parents=True)
    (pre / name / PLANS_FILE).write_text(json.dumps(plans, indent=1))
    (pre / name / DATASET_JSON).write_text(json.dumps(dataset_json, indent=1))
    specs = [
        {"plans": plans, "index": i, "shape": real.mr_shape, "case": f"mr_{i:03d}",
         "folder": str(folder)} for i in range(real.mr_cases)
    ]  # fmt: skip
    # forked: each case is drawn by its own process (numpy holds the GIL)
    with multiprocessing.get_context("fork").Pool(min(len(specs), cpu_count())) as pool:
        pool.map(store_mr_case, specs)
    ctx.cache["real_mr"] = {
        "name": name, "raw": ctx.work / "real" / "raw", "preprocessed": pre, "plans": plans,
        "dataset_json": dataset_json, "seconds": time.perf_counter() - start,
    }  # fmt: skip
    return ctx.cache["real_mr"]


# ------------------------------------------------------------------------------- CT-like case
def ct_case(ctx: Context) -> dict[str, Any]:
    """The raw CT-like case to predict (made once per run), with the shipped CT plans."""
    if "real_ct" in ctx.cache:
        return ctx.cache["real_ct"]
    start = time.perf_counter()
    real = ctx.profile.real
    plans, _ = shipped("ct", ctx.profile.dry_run)
    raw = ctx.work / "real" / "raw" / DATASETS["ct"][1]
    shapes = make_raw(raw, "ct", 1, real.ct_shape, real.ct_spacing)
    ctx.cache["real_ct"] = {
        "plans": plans, "dataset_json": json.loads((raw / DATASET_JSON).read_text()),
        "images": sorted((raw / TRAINING_FOLDERS[0]).iterdir()), "shapes": shapes,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    return ctx.cache["real_ct"]


def describe(configuration: dict[str, Any]) -> str:
    """Patch, batch, stages and features of a planned configuration, for a row's note."""
    kwargs = configuration["architecture"]["arch_kwargs"]
    return (
        f"patch {configuration['patch_size']}, batch {configuration['batch_size']}, "
        f"{kwargs['n_stages']} stages, features {kwargs['features_per_stage'][0]}-"
        f"{kwargs['features_per_stage'][-1]}"
    )


# ------------------------------------------------------------------------------- shipped plans
def write_plans(preset: str, work: Path) -> None:
    """Real-size raw data of ``preset``, our fingerprint and plan CLI; keep the three files."""
    from benchmarks.gpu.context import RealScale

    real = RealScale()
    number, name = DATASETS[preset]
    if preset == "mr":
        make_raw(work / "raw" / name, preset, real.mr_cases, real.mr_shape, real.mr_spacing)
    else:
        make_raw(work / "raw" / name, preset, 1, real.ct_shape, real.ct_spacing)
    roots = ["-d", str(number), "--raw", str(work / "raw"), "--preprocessed", str(work / "pre")]
    for command in (["fingerprint", *roots, "-np", "2"], ["plan", *roots]):
        subprocess.run([sys.executable, "-m", "nnunet_core", *command], check=True)
    target = PLANS_DIR / preset
    target.mkdir(parents=True, exist_ok=True)
    for file in (DATASET_JSON, FINGERPRINT_JSON, PLANS_FILE):
        (target / file).write_bytes((work / "pre" / name / file).read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-plans", action="store_true", required=True)
    parser.parse_args()
    for preset in DATASETS:
        with tempfile.TemporaryDirectory(prefix="gpu_realscale_") as work:
            write_plans(preset, Path(work))
    print(f"written: {PLANS_DIR}")


if __name__ == "__main__":
    main()
