"""Folds sharing one GPU: 1, 2 and 5 concurrent training processes, as five fold jobs would run.

Each process (spawned on CUDA, forked on the CPU) runs ``fold_worker``: it builds our trainer
(3d_fullres of the plans), warms up, says it is ready and waits for the common start, then
trains for the same wall time as the others. Total iterations/s is the sum over processes; peak
memory is each process's ``torch.cuda.max_memory_allocated`` (on the CPU: its maximum RSS).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import time
from pathlib import Path
from typing import Any

CONFIGURATION = "3d_fullres"
POLL_S = 0.05


def wait_for(path: Path, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            msg = f"{path.name} did not appear within {timeout:.0f} s"
            raise TimeoutError(msg)
        time.sleep(POLL_S)


def peak_mib(device: Any) -> float:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def fold_worker(spec: dict[str, Any]) -> None:
    """One fold process: warm up, meet the others at the start, train for ``seconds``."""
    import torch

    from benchmarks.common.random_training import make_trainer, random_batch

    torch.set_num_threads(int(spec["threads"]))
    plans = json.loads(Path(spec["plans"]).read_text())
    device = torch.device(spec["device"])
    trainer = make_trainer(plans, CONFIGURATION, device, Path(spec["work"]))
    batch = random_batch(trainer, torch.Generator().manual_seed(int(spec["index"])))
    trainer.model.train()
    for _ in range(int(spec["warmup"])):
        trainer.train_step(batch)  # returns the loss as a float: waits for the GPU
    Path(spec["ready"]).touch()
    wait_for(Path(spec["go"]), float(spec["wait_s"]))
    steps, start = 0, time.perf_counter()
    while steps < 1 or time.perf_counter() - start < float(spec["seconds"]):
        trainer.train_step(batch)
        steps += 1
    seconds = time.perf_counter() - start
    result = {"steps": steps, "seconds": seconds, "peak_mib": peak_mib(device)}
    tmp = Path(spec["result"] + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(spec["result"])


def start_method(device: str) -> str:
    """Fresh interpreters where CUDA is used (a forked CUDA context is unusable); on the CPU a
    fork, which costs no second import of torch on a busy CI machine ($GPU_CHECK_START: either)."""
    forced = os.environ.get("GPU_CHECK_START")
    if forced:
        return forced
    return "spawn" if device == "cuda" else "fork"


def start_folds(ctx: Any, count: int, folder: Path) -> tuple[list[Any], list[dict]]:
    folder.mkdir(parents=True, exist_ok=True)
    plans = folder / "plans.json"
    plans.write_text(json.dumps(ctx.plans))
    threads = ctx.profile.threads or max(1, (os.cpu_count() or 1) // count)
    context = multiprocessing.get_context(start_method(ctx.profile.device))
    processes, specs = [], []
    for index in range(count):
        spec = {
            "index": index, "plans": str(plans), "device": ctx.profile.device,
            "work": str(folder / f"fold_{index}"), "threads": threads,
            "warmup": ctx.profile.warmup, "seconds": ctx.profile.fold_seconds,
            "ready": str(folder / f"ready_{index}"), "go": str(folder / "go"),
            "result": str(folder / f"result_{index}.json"), "wait_s": max(5.0, ctx.time_left()),
        }  # fmt: skip
        process = context.Process(target=fold_worker, args=(spec,), daemon=True)
        process.start()
        processes.append(process)
        specs.append(spec)
    return processes, specs


def failure(processes: list[Any]) -> str | None:
    for index, process in enumerate(processes):
        if process.exitcode not in (None, 0):
            return f"fold process {index} exited {process.exitcode} (its traceback: stderr)"
    return None


def unfinished(processes: list[Any]) -> str | None:
    alive = [i for i, p in enumerate(processes) if p.is_alive()]
    return f"fold processes {alive} still running at the end of the budget" if alive else None


def wait_ready(ctx: Any, processes: list[Any], specs: list[dict]) -> None:
    """All warmed up (or raise: a dead process, or the section's budget spent)."""
    while not all(Path(s["ready"]).exists() for s in specs):
        problem = failure(processes)
        if problem:
            raise RuntimeError(problem)
        if ctx.time_left() < ctx.profile.fold_seconds + 2:
            raise TimeoutError("the folds were not warmed up within the section's budget")
        time.sleep(POLL_S)


def run_folds(ctx: Any, count: int) -> list[dict[str, float]]:
    """Start ``count`` fold processes together; their results (steps, seconds, peak_mib)."""
    folder = ctx.work / f"folds_{count}"
    processes, specs = start_folds(ctx, count, folder)
    try:
        wait_ready(ctx, processes, specs)
        (folder / "go").touch()
        for process in processes:
            process.join(timeout=max(1.0, ctx.time_left()))
        problem = failure(processes) or unfinished(processes)
        if problem:
            raise RuntimeError(problem)
        return [json.loads(Path(s["result"]).read_text()) for s in specs]
    finally:
        for process in processes:  # ours: stop what is left after a failure or timeout
            if process.is_alive():
                process.kill()
                process.join()


def fold_rows(ctx: Any, count: int) -> list:
    from benchmarks.gpu.context import Row

    results = run_folds(ctx, count)
    rates = [r["steps"] / r["seconds"] for r in results]
    peaks = [r["peak_mib"] for r in results]
    kind = "CUDA max_memory_allocated" if ctx.profile.device == "cuda" else "CPU max RSS"
    name = f"{count} fold{'s' if count > 1 else ''}"
    spread = f"min {min(rates):.3g}, max {max(rates):.3g}"
    return [
        Row("folds", f"{name}: total", sum(rates), "it/s", f"{CONFIGURATION}, one GPU"),
        Row("folds", f"{name}: per fold", sum(rates) / count, "it/s", spread),
        Row("folds", f"{name}: peak memory", max(peaks), "MiB", f"max over processes, {kind}"),
    ]


def folds_section(ctx: Any) -> list:
    from benchmarks.gpu.context import Row, guarded

    rows: list = []
    for count in ctx.profile.fold_counts:
        if ctx.time_left() < ctx.profile.fold_seconds + 2:
            rows.append(Row("folds", f"{count} folds: total", None, "", "skipped: budget spent"))
            continue
        guarded(rows, "folds", f"{count} folds: total", lambda c=count: fold_rows(ctx, c))
    return rows
