"""The measurements of ``check.py``: train step, loader vs GPU, prediction, compile, DDP.

Each section returns rows; a sub-measurement that fails becomes a row with its error (``guarded``),
so one broken configuration never hides the other's figures. The folds-sharing-a-GPU section lives
in ``folds.py``, upstream's train step in ``upstream.py``, the real-size sections in
``realscale/sections.py``, issue 50's GPU paths (run last) in ``gpu_paths.py``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from benchmarks.common.random_training import LABELS, make_trainer, time_ours
from benchmarks.gpu.context import CONFIGURATIONS, Context, Row, guarded
from benchmarks.gpu.folds import folds_section
from benchmarks.gpu.gpu_paths import PATH_SECTIONS
from benchmarks.gpu.new_scans import NEW_SCANS_SECTIONS
from benchmarks.gpu.realscale.sections import REAL_SECTIONS
from benchmarks.gpu.upstream import upstream_step_rows
from nnunet_core.io.plans import Plans
from nnunet_core.model import build_network, count_parameters

DATASET = "Dataset978_GpuCheck"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def precision(device: torch.device) -> str:
    return "AMP fp16" if device.type == "cuda" else "fp32 (CPU)"


def peak_memory_note(device: torch.device) -> str:
    if device.type != "cuda":
        return ""
    return f", peak {torch.cuda.max_memory_allocated(device) / 2**20:.0f} MiB"


# ------------------------------------------------------------------------------- train step
def ours_step_rows(ctx: Context, configuration: str) -> list[Row]:
    """Our trainer's own ``train_step`` on random data of the plan's batch and patch size."""
    device = torch.device(ctx.profile.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    trainer = make_trainer(ctx.plans, configuration, device, ctx.work / "train")
    result = time_ours(trainer, ctx.profile.steps, ctx.profile.warmup)
    ctx.step_seconds[configuration] = result["median"]
    shape = [trainer.batch_size, *trainer.patch_size]
    note = (
        f"median of {ctx.profile.steps}; batch x patch {shape}, "
        f"{count_parameters(trainer.network):,} params, {precision(device)}"
        f"{peak_memory_note(device)}"
    )
    return [Row("train", f"ours {configuration} step", result["median"], "s", note)]


def train_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    for configuration in CONFIGURATIONS:
        what = f"ours {configuration} step"
        guarded(rows, "train", what, lambda c=configuration: ours_step_rows(ctx, c))
    for configuration in CONFIGURATIONS:
        what = f"upstream {configuration} step"
        guarded(rows, "train", what, lambda c=configuration: upstream_step_rows(ctx, c))
    return rows


# ------------------------------------------------------------------------------- loader
def write_case(folder: Path, index: int, shape: tuple[int, ...], patch: list[int]) -> None:
    """One preprocessed case as our preprocessor stores it: cropped to the body, z-scored,
    label, foreground locations."""
    from nnunet_core.dataset.shapes import make_phantom
    from nnunet_core.io.blosc2_store import save_case
    from nnunet_core.preprocessing.cropping import crop_to_nonzero
    from nnunet_core.preprocessing.foreground import locations_to_json, sample_class_locations

    phantom = make_phantom(np.random.default_rng(index), shape, 1)
    seg = phantom.label[None].astype(np.int16)
    data, seg, _ = crop_to_nonzero(phantom.images.astype(np.float32), seg)  # to the body
    data = (data - data.mean()) / max(float(data.std()), 1e-8)
    foreground = [v for v in LABELS.values() if v]
    locations = locations_to_json(sample_class_locations(seg, foreground))
    properties = {"class_locations": locations, "spacing": [1.0] * len(shape)}
    save_case(folder, f"case_{index:03d}", data, seg, properties, patch)


def write_dataset(ctx: Context) -> Path:
    """A preprocessed dataset for the reference plans (both configurations read the same cases)."""
    folder = ctx.work / DATASET
    if folder.is_dir():
        return folder
    plans = {**ctx.plans, "dataset_name": DATASET}
    folder.mkdir(parents=True)
    (folder / "nnUNetPlans.json").write_text(json.dumps(plans, indent=1))
    identifiers = [Plans(plans).data_identifier_of(c) for c in CONFIGURATIONS]
    cases = folder / identifiers[0]
    cases.mkdir()
    patch = list(Plans(plans).configuration(CONFIGURATIONS[-1]).patch_size)
    for index in range(ctx.profile.loader_cases):
        write_case(cases, index, ctx.profile.case_shape, patch)
    for other in identifiers[1:]:
        if other != identifiers[0]:
            (folder / other).symlink_to(cases.name)
    return folder


def loader_batches_per_s(ctx: Context, configuration: str, folder: Path) -> tuple[float, list]:
    """Batches/s our training stream delivers with the profile's workers, after its prefetch."""
    from benchmarks.common.our_loader import build_ours
    from nnunet_core.training.data.workers import BatchStream

    make_batch = build_ours(folder, configuration)
    workers = ctx.profile.loader_workers
    with BatchStream(make_batch, workers, iterations_per_epoch=10**6) as stream:
        for _ in range(stream.prefetch + workers):  # drain what was built before the clock
            batch = next(stream)
        count, start = 0, time.perf_counter()
        limit = start + min(20.0, max(1.0, ctx.time_left() / 4))
        while count < ctx.profile.loader_batches and (count < 2 or time.perf_counter() < limit):
            batch = next(stream)
            count += 1
        seconds = time.perf_counter() - start
    return count / seconds, list(batch["data"].shape)


def wait_fraction(loader_s: float, step_s: float) -> float:
    """Share of each iteration the GPU idles: the cycle is the slower of loader and step."""
    return max(0.0, loader_s - step_s) / max(loader_s, step_s)


def loader_rows(ctx: Context, configuration: str, folder: Path) -> list[Row]:
    rate, shape = loader_batches_per_s(ctx, configuration, folder)
    workers = ctx.profile.loader_workers
    rows = [
        Row("loader", f"ours {configuration} batches", rate, "batches/s",
            f"{workers} workers (CPUs: {os.cpu_count()}), batch {shape}, loader alone"),
    ]  # fmt: skip
    step = ctx.step_seconds.get(configuration)
    if step is None:
        rows.append(Row("loader", f"{configuration} GPU wait", None, "", "error: no step time"))
        return rows
    note = f"max(0, {1 / rate:.4f} s/batch - {step:.4f} s/step) / max(both)"
    rows.append(Row("loader", f"{configuration} GPU wait", wait_fraction(1 / rate, step),
                    "fraction", note))  # fmt: skip
    return rows


def loader_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    folder = write_dataset(ctx)
    for configuration in CONFIGURATIONS:
        what = f"ours {configuration} batches"
        guarded(rows, "loader", what, lambda c=configuration: loader_rows(ctx, c, folder))
    return rows


# ------------------------------------------------------------------------------- predict
def predict_section(ctx: Context) -> list[Row]:
    """Our sliding window over one synthetic case, mirroring off and on (3d_fullres)."""
    from nnunet_core.inference.predictor import tile_batch_size
    from nnunet_core.inference.sliding_window import predict_logits_from_folds, tile_slicers

    device = torch.device(ctx.profile.device)
    conf = Plans(ctx.plans).configuration("3d_fullres")
    channels, heads = len(conf.normalization_schemes), len(LABELS)
    torch.manual_seed(0)
    network = build_network(conf, channels, heads, False).to(device).eval()
    data = torch.randn((channels, *ctx.profile.predict_shape))
    patch, tiles = list(conf.patch_size), tile_batch_size(conf)
    axes = list(range(len(patch)))
    count = len(tile_slicers(list(data.shape[1:]), patch, 0.5))
    rows = []
    for label, mirror in (("off", None), ("on", axes)):
        seconds = []
        for _ in range(2):  # the first run includes cuDNN's algorithm search
            sync(device)
            start = time.perf_counter()
            predict_logits_from_folds([network], data, patch, heads, 0.5, True, mirror,
                                      device=device, batch_tiles=tiles)  # fmt: skip
            sync(device)
            seconds.append(time.perf_counter() - start)
        note = f"case {list(data.shape)}, {count} tiles of {patch}, {tiles} per forward"
        rows.append(Row("predict", f"3d_fullres mirroring {label}", min(seconds), "s/case", note))
    return rows


# ------------------------------------------------------------------------------- compile
def compiled_step_rows(ctx: Context, configuration: str) -> list[Row]:
    """Train step compiled (the trainer's ``maybe_compile`` on CUDA) against not compiled."""
    from nnunet_core.training.optimizer import maybe_compile

    device = torch.device(ctx.profile.device)
    plain = make_trainer(ctx.plans, configuration, device, ctx.work / "compile")
    off = time_ours(plain, ctx.profile.steps, ctx.profile.warmup)["median"]
    del plain
    trainer = make_trainer(ctx.plans, configuration, device, ctx.work / "compile")
    backend = ctx.profile.compile_backend
    if device.type == "cuda":
        trainer.model = maybe_compile(trainer.network, device, True)
    else:  # the trainer never compiles on the CPU; the dry run still goes through dynamo
        trainer.model = torch.compile(trainer.network, backend=backend)
    first = time_ours(trainer, 1, 0)["median"]
    on = time_ours(trainer, ctx.profile.steps, ctx.profile.warmup)["median"]
    note = f"torch.compile backend {backend}"
    return [
        Row("compile", f"{configuration} step, compile off", off, "s", "median"),
        Row("compile", f"{configuration} step, compile on", on, "s", f"median; {note}"),
        Row("compile", f"{configuration} first compiled step", first, "s", "includes compiling"),
        Row("compile", f"{configuration} speed-up", off / on, "x", "off / on"),
    ]


def compile_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "compile", "3d_fullres step", lambda: compiled_step_rows(ctx, "3d_fullres"))
    return rows


# ------------------------------------------------------------------------------- DDP
@contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """Set variables for the block only (a leftover RANK would make later runs 'launched')."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ddp_rows(ctx: Context, configuration: str) -> list[Row]:
    """A few DDP steps of world size 1 in our process group (nccl on CUDA, gloo on the CPU)."""
    from nnunet_core.training.distributed import all_reduce_sum, find_free_port, process_group
    from nnunet_core.training.loss import build_loss

    variables = dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(find_free_port()))  # fmt: skip
    requested = torch.device(ctx.profile.device)
    with environ(variables), process_group(requested) as (topology, device):
        backend = torch.distributed.get_backend()
        trainer = make_trainer(ctx.plans, configuration, device, ctx.work / "ddp")
        ids = [device.index] if device.type == "cuda" else None
        trainer.model = torch.nn.parallel.DistributedDataParallel(trainer.model, device_ids=ids)
        conf = trainer.setup.configuration
        # as the trainer under DDP: batch Dice summed over ranks, coarsest head kept in the graph
        trainer.loss = build_loss(conf, trainer.setup.label_spec, True, all_reduce_sum, 1e-6)
        seconds = time_ours(trainer, ctx.profile.steps, ctx.profile.warmup)["median"]
        world = topology.world_size
    plain = ctx.step_seconds.get(configuration)
    ratio = f"; {seconds / plain:.2f}x the plain step" if plain else ""
    note = f"backend {backend}, world size {world}, device {device}{ratio}"
    return [Row("ddp", f"{configuration} DDP step", seconds, "s", note)]


def ddp_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "ddp", "3d_fullres DDP step", lambda: ddp_rows(ctx, "3d_fullres"))
    return rows


SECTIONS: dict[str, Callable[[Context], list[Row]]] = {
    "train": train_section,
    "loader": loader_section,
    "folds": folds_section,
    "predict": predict_section,
    "compile": compile_section,
    "ddp": ddp_section,
    **REAL_SECTIONS,
    **PATH_SECTIONS,
    **NEW_SCANS_SECTIONS,
}
