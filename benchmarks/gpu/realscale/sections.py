"""The GPU check's real-size sections (issue 34, item 5): data, step, GPU busy, one case predicted.

- ``real_data``: the MR-like 256^3 set (drawn and stored preprocessed) and one CT-like 512x512xN
  raw case, with the shipped plans (``data.py``); its rows are the seconds each took.
- ``real_step``: our trainer's ``train_step`` (AMP: autocast + GradScaler on CUDA) at the planned
  3d_fullres patch and batch of the MR set (112x160x128, 2), peak GPU memory; upstream's beside it.
- ``real_busy``: our real training loader (the fold's patch sampling and augmentation, in 4, 8 and
  12 worker processes) feeding that step for a fixed time; busy = compute / wall, data wait the
  rest (as the trainer's epoch timer counts them); upstream's loader and step the same way.
- ``real_predict``: the CT-like case predicted end to end by ``predict_cases`` (read, preprocess,
  sliding window with the planned 3d_fullres network, export), mirroring off and on, beside
  upstream's ``nnUNetPredictor.predict_from_files``. Weights are random: same compute as trained.

Rows measured off CUDA (``--dry-run``) come from the same code; CUDA-only lines (synchronising,
``torch.cuda`` peak memory) run only on a GPU machine.
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common.random_training import make_trainer, time_ours
from benchmarks.gpu.context import Context, Row, cpu_count, guarded
from benchmarks.gpu.realscale.data import (
    CONFIGURATION,
    ct_case,
    describe,
    image_io_missing,
    mr_dataset,
    shipped,
)
from benchmarks.gpu.realscale.upstream import (
    SKIP_REASON,
    upstream_busy,
    upstream_predict,
    upstream_real_step,
)

MIB = 2**20
# one run each (the budget): the first includes cuDNN's algorithm search, on both sides
FIRST = {"off": "first run (with cuDNN's search)", "on": "second run"}


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: torch.device) -> tuple[float, str]:
    """Peak GPU memory since ``reset_peak`` on CUDA; off CUDA the process's maximum RSS."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) / MIB, "torch.cuda.max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "CPU max RSS (no CUDA)"


def cudnn_benchmark() -> str:
    return f"cuDNN benchmark {'on' if torch.backends.cudnn.benchmark else 'off'}"


# ------------------------------------------------------------------------------- data
def real_data_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    real = ctx.profile.real

    def mr() -> list[Row]:
        data = mr_dataset(ctx)
        planned = describe(data["plans"]["configurations"][CONFIGURATION])
        note = (f"{real.mr_cases} x {list(real.mr_shape)} at {list(real.mr_spacing)} mm drawn "
                f"and stored preprocessed (crop, normalise, class locations, blosc2); "
                f"{planned}")  # fmt: skip
        return [Row("real_data", "MR-like set: make", data["seconds"], "s", note)]

    def ct() -> list[Row]:
        missing = image_io_missing()
        if missing:
            return [Row("real_data", "CT-like case: make", None, "", missing)]
        data = ct_case(ctx)
        planned = describe(data["plans"]["configurations"][CONFIGURATION])
        note = (f"raw image of {data['shapes'][0]} at about {list(real.ct_spacing)} mm; "
                f"{planned}")  # fmt: skip
        return [Row("real_data", "CT-like case: make", data["seconds"], "s", note)]

    guarded(rows, "real_data", "MR-like set: make", mr)
    guarded(rows, "real_data", "CT-like case: make", ct)
    return rows


# ------------------------------------------------------------------------------- step
def real_step_rows(ctx: Context) -> list[Row]:
    plans, _ = shipped("mr", ctx.profile.dry_run)  # random batches: the plans alone
    device = torch.device(ctx.profile.device)
    real = ctx.profile.real
    trainer = make_trainer(plans, CONFIGURATION, device, ctx.work / "real_step")
    reset_peak(device)
    result = time_ours(trainer, real.steps, real.warmup)  # synchronised after every step
    peak, kind = peak_mib(device)
    ctx.step_seconds["real"] = result["median"]
    precision = "fp32 (CPU)"
    if device.type == "cuda":  # cuDNN as our trainer leaves it (upstream's run_training: on)
        precision = f"AMP fp16 (autocast + GradScaler), {cudnn_benchmark()}"
    shape = [trainer.batch_size, *trainer.patch_size]
    note = f"median of {real.steps}; batch x patch {shape}, {precision}"
    return [
        Row("real_step", "ours 3d_fullres real-patch step", result["median"], "s", note),
        Row("real_step", "ours real-patch peak memory", peak, "MiB", kind),
    ]


def upstream_step_rows(ctx: Context) -> list[Row]:
    what = "upstream 3d_fullres real-patch step"
    if ctx.peer_python is None:
        return [Row("real_step", what, None, "", SKIP_REASON)]
    result = upstream_real_step(ctx, shipped("mr", ctx.profile.dry_run)[0])
    note = f"nnunetv2 {result['version']}, median of {ctx.profile.real.steps}"
    ours = ctx.step_seconds.get("real")
    if ours:
        note += f"; ours/upstream {ours / result['median']:.2f}"
    rows = [Row("real_step", what, result["median"], "s", note)]
    if result["peak_mib"] is not None:
        rows.append(Row("real_step", "upstream real-patch peak memory", result["peak_mib"],
                        "MiB", "torch.cuda.max_memory_allocated"))  # fmt: skip
    return rows


def real_step_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "real_step", "ours 3d_fullres real-patch step", lambda: real_step_rows(ctx))
    guarded(rows, "real_step", "upstream 3d_fullres real-patch step",
            lambda: upstream_step_rows(ctx))  # fmt: skip
    return rows


# ------------------------------------------------------------------------------- busy
def real_trainer(ctx: Context, data: dict[str, Any]) -> Any:
    """Our trainer of fold 'all' of the preprocessed MR set, as ``nnunet-core train`` builds it."""
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
    from nnunet_core.layout.roots import Roots
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots(data["raw"], data["preprocessed"], ctx.work / "real" / "results")
    setup = prepare_fold(roots, data["name"], CONFIGURATION, "all", DEFAULT_PLANS_NAME,
                         "nnUNetTrainer")  # fmt: skip
    settings = TrainerSettings(disable_checkpointing=True)  # workers: ``busy_of``'s stream
    return Trainer(setup, settings, torch.device(ctx.profile.device))


def busy_of(trainer: Any, workers: int, seconds: float) -> dict[str, float]:
    """Our training stream of ``workers`` processes feeding ``trainer.train_step`` for
    ``seconds`` after the batches built before the clock are drained; wait vs compute as the
    epoch timer counts them (``train_step`` returns the loss, so every step is synchronised)."""
    from nnunet_core.training.data.workers import BatchStream
    from nnunet_core.training.trainer.epoch_timing import EpochTimer

    train_loader, _ = trainer._loaders()  # the fold's training loader, as ``fit`` streams it
    trainer.model.train()
    with BatchStream(train_loader, workers, iterations_per_epoch=10**6) as stream:
        for _ in range(stream.prefetch + workers):
            next(stream)
        timer, steps = EpochTimer(trainer.device), 0
        end = time.perf_counter() + seconds
        for batch in timer.batches(stream, 10**6):
            trainer.train_step(batch)
            steps += 1
            if time.perf_counter() >= end:
                break
        timing = timer.finish()
    wall = timing.data_wait + timing.compute
    return {"busy": timing.compute / wall, "steps_per_s": steps / wall, "wait_s": timing.data_wait,
            "compute_s": timing.compute, "steps": steps}  # fmt: skip


def busy_row(side: str, workers: int, result: dict[str, float], extra: str = "") -> Row:
    note = (
        f"{result['steps']} steps in {result['wait_s'] + result['compute_s']:.1f} s "
        f"({result['steps_per_s']:.2f} it/s), data wait {result['wait_s']:.1f} s; "
        f"{cpu_count()} CPUs{extra}"
    )
    return Row("real_busy", f"{side} GPU busy, {workers} workers", result["busy"], "fraction", note)


def ours_busy_rows(ctx: Context) -> list[Row]:
    real = ctx.profile.real
    trainer = real_trainer(ctx, mr_dataset(ctx))
    time_ours(trainer, 1, real.warmup)  # warm-up (allocator, cuDNN) before any clock
    extra = "; batches not pinned (as the trainer)"
    if trainer.device.type == "cuda":
        extra += f", {cudnn_benchmark()}"
    rows: list[Row] = []
    for workers in real.workers:  # each on its own: a cut run keeps the counts it measured
        what = f"ours GPU busy, {workers} workers"
        if ctx.time_left() < 2 * real.busy_seconds:
            rows.append(Row("real_busy", what, None, "", "skipped: budget spent"))
            continue

        def measure(w: int = workers) -> list[Row]:
            return [busy_row("ours", w, busy_of(trainer, w, real.busy_seconds), extra)]

        guarded(rows, "real_busy", what, measure)
    return rows


def upstream_busy_rows(ctx: Context) -> list[Row]:
    workers = ctx.profile.real.workers
    if ctx.peer_python is None:
        return [Row("real_busy", f"upstream GPU busy, {w} workers", None, "", SKIP_REASON)
                for w in workers]  # fmt: skip
    results = upstream_busy(ctx, mr_dataset(ctx))
    extra = (f"; nnunetv2 {results['version']}, NonDetMultiThreadedAugmenter, pinned on CUDA, "
             "cuDNN benchmark on (its run_training)")  # fmt: skip
    return [busy_row("upstream", w, results[str(w)], extra) for w in workers]


def real_busy_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "real_busy", "ours GPU busy", lambda: ours_busy_rows(ctx))
    guarded(rows, "real_busy", "upstream GPU busy", lambda: upstream_busy_rows(ctx))
    return rows


# ------------------------------------------------------------------------------- predict
def random_model(ctx: Context, data: dict[str, Any]) -> Path:
    """A model folder as training leaves it (fold 0), with the planned network's initial weights."""
    from nnunet_core.io.plans import Plans
    from nnunet_core.layout.raw import DATASET_JSON
    from nnunet_core.layout.results import PLANS_JSON
    from nnunet_core.model import build_network
    from nnunet_core.model import checkpoint as ckpt

    folder = ctx.work / "real" / "model_ours"
    if (folder / PLANS_JSON).is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PLANS_JSON).write_text(json.dumps(data["plans"], indent=1))
    (folder / DATASET_JSON).write_text(json.dumps(data["dataset_json"], indent=1))
    conf = Plans(data["plans"]).configuration(CONFIGURATION)
    labels = len(data["dataset_json"]["labels"])
    network = build_network(conf, len(conf.normalization_schemes), labels, True)
    state = {
        "network_weights": network.state_dict(), "trainer_name": "nnUNetTrainer",
        "init_args": {"plans": data["plans"], "configuration": CONFIGURATION, "fold": 0},
        "inference_allowed_mirroring_axes": list(range(len(conf.patch_size))), "current_epoch": 0,
    }  # fmt: skip
    ckpt.save_checkpoint(state, folder / "fold_0" / ckpt.FINAL)
    return folder


def ours_predict_rows(ctx: Context) -> list[Row]:
    from nnunet_core.dataset.discovery import RawCase
    from nnunet_core.inference.model_folder import load_trained_model
    from nnunet_core.inference.predictor import PredictionSettings, predict_cases

    missing = image_io_missing()
    if missing:
        return [Row("real_predict", f"ours case, mirroring {m}", None, "", missing)
                for m in ("off", "on")]  # fmt: skip
    data = ct_case(ctx)
    model = load_trained_model(random_model(ctx, data), [0])
    image = data["images"][0]
    case = RawCase(image.name.rsplit("_", 1)[0], (image,), None)
    device = torch.device(ctx.profile.device)
    rows = []
    processes = ctx.profile.real.predict_processes
    for label, mirror in (("off", False), ("on", True)):
        reset_peak(device)
        start = time.perf_counter()
        settings = PredictionSettings(use_mirroring=mirror, device=device.type,
                                      num_processes_preprocessing=processes,
                                      num_processes_export=processes, progress=False)  # fmt: skip
        predict_cases(model, [case], ctx.work / "real" / f"pred_ours_{label}", settings)
        seconds = time.perf_counter() - start
        peak, kind = peak_mib(device)
        note = (f"{image.name} {data['shapes'][0]}, export included, {processes} preprocessing "
                f"and export processes; {FIRST[label]}")  # fmt: skip
        ctx.cache[f"predict_{label}"] = seconds
        rows.append(Row("real_predict", f"ours case, mirroring {label}", seconds, "s",
                        f"{note}; peak {peak:.0f} MiB ({kind})"))  # fmt: skip
    return rows


def upstream_predict_rows(ctx: Context) -> list[Row]:
    names = [f"upstream case, mirroring {m}" for m in ("off", "on")]
    missing = image_io_missing() or (SKIP_REASON if ctx.peer_python is None else None)
    if missing:
        return [Row("real_predict", what, None, "", missing) for what in names]
    data = ct_case(ctx)
    result = upstream_predict(ctx, data, ctx.work / "real" / "model_ours")
    rows = []
    for what, label in zip(names, ("off", "on"), strict=True):
        run = result[label]
        ours = ctx.cache.get(f"predict_{label}")
        ratio = f"; ours/upstream {ours / run['seconds']:.2f}" if ours else ""
        peak = "" if run["peak_mib"] is None else f", peak {run['peak_mib']:.0f} MiB"
        call = "predict_from_files" + ("" if ctx.profile.real.predict_processes else "_sequential")
        note = (f"nnUNetPredictor.{call}, nnunetv2 {result['version']}; "
                f"{FIRST[label]}{peak}{ratio}")  # fmt: skip
        rows.append(Row("real_predict", what, run["seconds"], "s", note))
    return rows


def real_predict_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "real_predict", "ours case", lambda: ours_predict_rows(ctx))
    guarded(rows, "real_predict", "upstream case", lambda: upstream_predict_rows(ctx))
    return rows


REAL_SECTIONS = {
    "real_data": real_data_section,
    "real_step": real_step_section,
    "real_busy": real_busy_section,
    "real_predict": real_predict_section,
}
