"""The GPU check's sections for issue 50's fixes, the GPU paths no CPU test can run.

- ``oom_fallback``: one real-size MR-like case (the shipped MR plans' 3d_fullres network, random
  weights, 256^3) through the sliding window, once as is and once with a CUDA out-of-memory error
  forced at the first accumulation (``sliding_window._add_tile`` replaced for the run, as
  tests/unit/inference/test_oom_fallback.py injects it). Peak device memory of the normal run,
  of the failed attempt, what is still allocated when the retry starts (after the fallback emptied
  the cache: what was allocated before the run, or the failed attempt's tensors were kept) and the
  retry's own peak; the seconds of both; whether the outputs agree. On the CPU the CPU stands in
  for the device (``can_fall_back`` says yes, as in the unit test): the same path, no memory rows.
- ``predict_slots``: two slot holders (``slot_holder.py``: a prediction job's ``--gpu-slot``)
  started together: the GPU each got and how long the second waited (one GPU: it waits for the
  first). The dry run pretends one GPU (``$nnUNet_num_gpus``, as the slot tests do).
- ``visible_devices``: two holders (two folds) under an exported ``CUDA_VISIBLE_DEVICES`` naming
  the machine's GPUs: the pool entry each got and, from inside, torch's device, its name and UUID.
  The dry run exports a pretend pool "0,1".
- ``cudnn``: our trainer's step on the reference 3d_fullres plans with ``cudnn.benchmark`` off,
  on (``configure_kernels`` of a CUDA fold) and in deterministic mode; the CPU's rows time the
  CPU step (no cuDNN there: the same kernels three times).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch

from benchmarks.gpu.context import Context, Row, guarded
from benchmarks.gpu.slot_holder import run_holders

MIB = 2**20
NA_CPU = "n/a on CPU (no device memory)"
FORCED = "CUDA out of memory. Tried to allocate 2.00 GiB (forced by gpu_check at the first tile)"


@contextlib.contextmanager
def replaced(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


# ------------------------------------------------------------------------------- OOM fallback
class Memory:
    """Device memory in MiB on CUDA; None elsewhere (the CPU has no such counters)."""

    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"

    def allocated(self) -> float | None:
        if not self.cuda:
            return None
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory_allocated(self.device) / MIB

    def peak(self) -> float | None:
        if not self.cuda:
            return None
        torch.cuda.synchronize(self.device)
        return torch.cuda.max_memory_allocated(self.device) / MIB

    def reset(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)


def fallback_case(ctx: Context) -> tuple[torch.nn.Module, torch.Tensor, Any, int]:
    """The MR plans' 3d_fullres network (random weights) on the device and a case of the MR set's
    size (the dry run's: tiny)."""
    from benchmarks.gpu.realscale.data import CONFIGURATION, shipped
    from nnunet_core.io.plans import Plans
    from nnunet_core.model import build_network

    plans, dataset_json = shipped("mr", ctx.profile.dry_run)
    conf = Plans(plans).configuration(CONFIGURATION)
    channels, heads = len(conf.normalization_schemes), len(dataset_json["labels"])
    torch.manual_seed(0)
    network = build_network(conf, channels, heads, False).to(ctx.profile.device).eval()
    generator = torch.Generator().manual_seed(0)
    data = torch.randn((channels, *ctx.profile.real.mr_shape), generator=generator)
    return network, data, conf, heads


def forced_fallback(predict: Any, memory: Memory, device: torch.device) -> dict[str, Any]:
    """``predict()`` with the first accumulation failing as a full device does; what the memory
    was at the fault, when the retry started (after the cache was emptied) and at its peak.
    The spies hold no tensor: the fallback must be able to free them all."""
    from nnunet_core.inference import device_fallback, sliding_window

    seen: dict[str, Any] = {"attempts": [], "faulted": False, "fault": None, "release": None}
    add_tile, release = sliding_window._add_tile, device_fallback.release_device_memory
    on_results = sliding_window._on_results_device

    def failing_add_tile(*args: Any) -> None:
        if not seen["faulted"]:
            seen["faulted"], seen["fault"] = True, memory.peak()
            raise torch.cuda.OutOfMemoryError(FORCED)
        add_tile(*args)

    def measured_release(dev: torch.device) -> None:
        release(dev)
        seen["release"] = memory.allocated()
        memory.reset()  # the retry's peak is its own

    def recorded(data: Any, gaussian: Any, outputs: int, results: torch.device) -> Any:
        seen["attempts"].append(str(results))
        return on_results(data, gaussian, outputs, results)

    log = io.StringIO()
    with contextlib.ExitStack() as stack:
        stack.enter_context(replaced(sliding_window, "_add_tile", failing_add_tile))
        stack.enter_context(replaced(device_fallback, "release_device_memory", measured_release))
        stack.enter_context(replaced(sliding_window, "_on_results_device", recorded))
        if device.type == "cpu":  # the CPU stands in for the device (the unit test's way)
            stack.enter_context(replaced(device_fallback, "can_fall_back", lambda _d: True))
        stack.enter_context(contextlib.redirect_stderr(log))
        memory.reset()
        seen["before"] = memory.allocated()  # the network, and what earlier runs keep
        start = time.perf_counter()
        seen["logits"] = predict()
        seen["seconds"] = time.perf_counter() - start
    print(log.getvalue(), end="", file=sys.stderr, flush=True)
    seen["retry_peak"] = memory.peak()
    seen["logged"] = "predicting this case again with them on the CPU" in log.getvalue()
    if len(seen["attempts"]) != 2 or (memory.cuda and seen["release"] is None):
        msg = f"no fallback: attempts {seen['attempts']}, log {log.getvalue()!r}"
        raise RuntimeError(msg)
    return seen


def mib_row(what: str, value: float | None, note: str) -> Row:
    if value is None:
        return Row("oom_fallback", what, None, "", NA_CPU)
    return Row("oom_fallback", what, value, "MiB", note)


def oom_fallback_rows(ctx: Context) -> list[Row]:
    from nnunet_core.inference.predictor import tile_batch_size
    from nnunet_core.inference.sliding_window import sliding_window_logits, tile_slicers

    device = torch.device(ctx.profile.device)
    memory = Memory(device)
    network, data, conf, heads = fallback_case(ctx)
    patch, tiles = list(conf.patch_size), tile_batch_size(conf)

    def predict() -> torch.Tensor:
        return sliding_window_logits(network, data, patch, heads, 0.5, True, None, device, tiles)

    memory.reset()
    start = time.perf_counter()
    normal = predict()
    normal_s, normal_peak = time.perf_counter() - start, memory.peak()
    run = forced_fallback(predict, memory, device)
    difference = float((run["logits"] - normal).abs().max())
    agreement = float((run["logits"].argmax(0) == normal.argmax(0)).float().mean())
    count = len(tile_slicers(list(data.shape[1:]), patch, 0.5))
    case = f"case {list(data.shape)}, {count} tiles of {patch}, {tiles} per forward, no mirroring"
    held = run["release"]
    freed = ""
    if held is not None and run["before"] is not None:
        extra = held - run["before"]
        kept = "freed" if extra < 1 else f"still held ({extra:.0f} MiB more)"
        freed = f"{run['before']:.0f} MiB before the run: the failed attempt's tensors {kept}"
    logged = "yes" if run["logged"] else "no"
    fallback_note = f"failed attempt and retry; attempts: {' then '.join(run['attempts'])}; "
    fallback_note += f"logged: {logged}"
    return [
        mib_row("normal: peak memory", normal_peak, f"sums on {device}; {case}"),
        Row("oom_fallback", "normal: time", normal_s, "s", case),
        mib_row("forced OOM: peak at the fault", run["fault"], "first attempt, first tile"),
        mib_row("retry start: memory held", held, f"after empty_cache; {freed}"),
        mib_row("retry: peak memory", run["retry_peak"], "sums on the CPU, network on the GPU"),
        Row("oom_fallback", "fallback: time", run["seconds"], "s", fallback_note),
        Row("oom_fallback", "outputs: max abs difference", difference, "", "fallback vs normal"),
        Row("oom_fallback", "outputs: argmax agreement", agreement, "fraction", "of voxels"),
    ]


def oom_fallback_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "oom_fallback", "forced fallback", lambda: oom_fallback_rows(ctx))
    return rows


# ------------------------------------------------------------------------------- slot holders
def gpu_value(entry: str | None) -> float | None:
    """A pool entry as a number for the table (a UUID or MIG name stays in the note)."""
    return float(entry) if entry and entry.isdigit() else None


def order_of(results: list[dict]) -> list[dict]:
    """First the holder that took its slot first."""
    return sorted(results, key=lambda r: r["acquired_at"])


def spread_note(results: list[dict], gpus: int) -> str:
    got = [r["visible"] for r in results]
    if None in got:
        return "no slot taken (no GPU in the pool?)"
    if len(set(got)) == len(got):
        return f"{gpus} GPU(s): spread over {', '.join(sorted(got))}"
    return f"{gpus} GPU(s): serialised on {got[0]}, the second waited for the first's slot"


def holder_rows(section: str, label: str, results: list[dict], gpus: int, pool: str) -> list[Row]:
    rows = []
    for index, result in enumerate(order_of(results)):
        slot = "no slot" if result["slots"] is None else f"slot {result['slots'][0]} of {gpus}"
        note = (f"CUDA_VISIBLE_DEVICES={result['visible']} ({slot}), "
                f"waited {result['waited_s']:.2f} s")  # fmt: skip
        value = gpu_value(result["visible"])
        rows.append(Row(section, f"{label} {index}: GPU", value, "", note))
    first, second = order_of(results)
    rows.append(Row(section, f"second {label}'s wait", second["waited_s"], "s",
                    f"{spread_note(results, gpus)}; {pool}"))  # fmt: skip
    gap = second["acquired_at"] - first["acquired_at"]
    note = f"the first holds its slot {first['hold_s']:.1f} s: at least that when serialised"
    rows.append(Row(section, f"second {label}'s slot after the first's", gap, "s", note))
    return rows


def machine_gpus() -> tuple[list[str], bool]:
    """The GPUs this machine gives us, by ``CUDA_VISIBLE_DEVICES`` names, and whether they come
    from a ``CUDA_VISIBLE_DEVICES`` of this machine's."""
    from nnunet_core.cluster import gpu_slots

    exported = os.environ.get(gpu_slots.VISIBLE_ENV)
    if exported is not None:
        return gpu_slots.visible_entries(exported), True
    count = gpu_slots.count_gpus() or torch.cuda.device_count()
    return [str(gpu) for gpu in range(count)], False


def predict_slots_rows(ctx: Context) -> list[Row]:
    """Two prediction jobs' slots: each a whole GPU of the machine's."""
    from nnunet_core.cluster import gpu_slots

    if ctx.profile.dry_run:
        gpus, exported, source = ["0"], False, f"pretend 1 GPU (${gpu_slots.NUM_GPUS_ENV}=1)"
    else:
        gpus, exported = machine_gpus()
        source = f"this machine's {gpu_slots.VISIBLE_ENV}" if exported else "this machine's GPUs"
    if not gpus:
        raise RuntimeError("no GPU found (/proc/driver/nvidia/gpus, torch)")
    updates = {gpu_slots.NUM_GPUS_ENV: str(len(gpus))}
    if exported:  # the machine's own value is the pool
        updates = {gpu_slots.VISIBLE_ENV: ",".join(gpus)}
    results = run_holders(ctx, "predict_slots", updates, use_torch=False)
    return holder_rows("predict_slots", "job", results, len(gpus), f"pool: {source}")


def visible_devices_rows(ctx: Context) -> list[Row]:
    """Two folds' slots under an exported ``CUDA_VISIBLE_DEVICES``; the device from inside."""
    from nnunet_core.cluster import gpu_slots

    gpus, source = (["0", "1"], "a pretend pool") if ctx.profile.dry_run else (
        machine_gpus()[0], "the machine's GPUs")  # fmt: skip
    if not gpus:
        raise RuntimeError("no GPU found (/proc/driver/nvidia/gpus, torch)")
    exported = ",".join(gpus)
    updates = {gpu_slots.VISIBLE_ENV: exported}
    results = run_holders(ctx, "visible_devices", updates, use_torch=True)
    pool = f"exported {gpu_slots.VISIBLE_ENV}={exported} ({source})"
    rows = holder_rows("visible_devices", "fold", results, len(gpus), pool)
    for index, result in enumerate(order_of(results)):
        what = f"fold {index}: torch device"
        if result["device"] is None:
            rows.append(Row("visible_devices", what, None, "", result["why"]))
            continue
        note = (f"torch.cuda.current_device() with {result['count']} visible: {result['name']}, "
                f"{result['uuid']}")  # fmt: skip
        rows.append(Row("visible_devices", what, result["device"], "", note))
    return rows


def predict_slots_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "predict_slots", "two prediction jobs", lambda: predict_slots_rows(ctx))
    return rows


def visible_devices_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "visible_devices", "two folds", lambda: visible_devices_rows(ctx))
    return rows


# ------------------------------------------------------------------------------- cudnn
@contextlib.contextmanager
def kernel_settings_kept() -> Iterator[None]:
    """cuDNN's flags, deterministic mode and ``CUBLAS_WORKSPACE_CONFIG`` as they were before, for
    the sections after this one."""
    cudnn = torch.backends.cudnn
    saved = (cudnn.benchmark, cudnn.deterministic, torch.are_deterministic_algorithms_enabled())
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    try:
        yield
    finally:
        cudnn.benchmark, cudnn.deterministic = saved[0], saved[1]
        torch._C._set_deterministic_algorithms(saved[2])
        if workspace is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def cudnn_rows(ctx: Context) -> list[Row]:
    from benchmarks.common.random_training import make_trainer, time_ours
    from nnunet_core.training.determinism import configure_kernels

    device = torch.device(ctx.profile.device)
    steps, warmup = min(ctx.profile.steps, 10), ctx.profile.warmup
    trainer = make_trainer(ctx.plans, "3d_fullres", device, ctx.work / "cudnn")
    shape = [trainer.batch_size, *trainer.patch_size]
    where = f"3d_fullres, batch x patch {shape}, median of {steps}"
    if device.type != "cuda":
        where += "; CPU: no cuDNN, the same kernels each time"
    rows = []
    with kernel_settings_kept():
        torch.backends.cudnn.benchmark = False
        off = time_ours(trainer, steps, warmup)["median"]
        rows.append(Row("cudnn", "step, benchmark off", off, "s", where))
        configure_kernels(False, 0, device)  # a CUDA fold's: autotuning on
        first = time_ours(trainer, 1, 0)["median"]
        on = time_ours(trainer, steps, warmup)["median"]
        state = f"cudnn.benchmark {torch.backends.cudnn.benchmark}"
        rows += [
            Row("cudnn", "step, benchmark on", on, "s", f"{where}; {state}"),
            Row("cudnn", "first step, benchmark on", first, "s", "includes cuDNN's search"),
            Row("cudnn", "speed-up of benchmark on", off / on, "x", "off / on"),
        ]

        def deterministic() -> list[Row]:
            configure_kernels(True, 0, device)  # --deterministic: benchmark off, exact kernels
            seconds = time_ours(trainer, steps, warmup)["median"]
            return [Row("cudnn", "step, deterministic", seconds, "s", f"{where}; off / this "
                        f"{off / seconds:.2f}")]  # fmt: skip

        guarded(rows, "cudnn", "step, deterministic", deterministic)
    return rows


def cudnn_section(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    guarded(rows, "cudnn", "step, benchmark off", lambda: cudnn_rows(ctx))
    return rows


PATH_SECTIONS = {
    "oom_fallback": oom_fallback_section,
    "predict_slots": predict_slots_section,
    "visible_devices": visible_devices_section,
    "cudnn": cudnn_section,
}
