"""GPU slot holders of the GPU check (``gpu_paths.py``): processes that take a whole GPU the way
a prediction job (``predict --gpu-slot``) or a fold does, say what they got and hold it.

``run_holders`` (in the check) starts two together; each runs

    python -m benchmarks.gpu.slot_holder SPEC.json

whose spec names the ready and go files (the holders start together, as in ``folds.py``), the
result file, how long to hold the slot, and whether to look at the device from inside with torch.
The slot is taken with ``gpu_slots.acquire_gpus(1, ..., folds_per_gpu=1)``, the call that
``take_slots_for`` makes for ``-device cuda``, only polled every ``POLL_S`` instead of every 10 s
so that a wait costs the check no more than the holding itself. torch is imported before the
clock, CUDA started only after the slot is taken: ``CUDA_VISIBLE_DEVICES`` is read once, when
CUDA starts. The lock goes with the process (the kernel releases a ``flock`` at exit). Their
environment drops a scheduler's job variables (SLURM_*, LSB_*), so that the workstation's slot
path is what runs even where the machine is a batch job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.context import ROOT
from benchmarks.gpu.folds import wait_for
from nnunet_core.cluster import gpu_slots

POLL_S = 0.1


# ------------------------------------------------------------------------------- the check's side
def holder_env(updates: dict[str, str]) -> dict[str, str]:
    """This environment without a scheduler's job variables, an exported pool or slots already
    held, plus ``updates``; our checkout first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "LSB_"))}
    env.pop(gpu_slots.HELD_ENV, None)
    env.pop(gpu_slots.VISIBLE_ENV, None)
    path = env.get("PYTHONPATH")
    env.update(PYTHONPATH=f"{ROOT}{os.pathsep + path if path else ''}", **updates)
    return env


def run_holders(ctx: Any, name: str, updates: dict[str, str], use_torch: bool) -> list[dict]:
    """Two slot holders with ``updates`` in their environment, started together (ready, then
    go), sharing a lock folder of their own; their results."""
    folder = ctx.work / name
    folder.mkdir(parents=True, exist_ok=True)
    env = holder_env(updates)
    hold_s = 1.0  # long beside a process's start, even on a loaded CI machine
    processes, specs = [], []
    for index in range(2):
        spec = {"ready": str(folder / f"ready_{index}"), "go": str(folder / "go"),
                "result": str(folder / f"result_{index}.json"), "lock_dir": str(folder / "locks"),
                "hold_s": hold_s, "torch": use_torch,
                "wait_s": max(5.0, ctx.time_left())}  # fmt: skip
        path = folder / f"spec_{index}.json"
        path.write_text(json.dumps(spec))
        command = [sys.executable, "-m", "benchmarks.gpu.slot_holder", str(path)]
        with (folder / f"stderr_{index}").open("w") as stderr:
            processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stderr=stderr))
        specs.append(spec)
    try:
        while not all(Path(s["ready"]).exists() for s in specs):
            if any(p.poll() not in (None, 0) for p in processes) or ctx.time_left() < 2:
                break
            time.sleep(0.02)
        (folder / "go").touch()
        for index, process in enumerate(processes):
            code = process.wait(timeout=max(1.0, ctx.time_left() - 1))
            if code:
                tail = (folder / f"stderr_{index}").read_text()[-300:]
                msg = f"slot holder {index} exited {code}: {tail}"
                raise RuntimeError(msg)
        return [json.loads(Path(s["result"]).read_text()) for s in specs]
    finally:
        for process in processes:  # ours: stop what is left after a failure or timeout
            if process.poll() is None:
                process.kill()
                process.wait()


# ------------------------------------------------------------------------------- a holder


def cuda_view(torch: Any) -> dict[str, Any]:
    """The device as the process sees it after the slot: ordinal, count, name and UUID (the
    physical GPU, as ``nvidia-smi -L`` names it); an allocation proves it usable."""
    if not torch.cuda.is_available():
        return {"device": None, "why": "n/a on CPU (no CUDA)"}
    ordinal = torch.cuda.current_device()
    probe = torch.ones(2**20, device=f"cuda:{ordinal}")
    torch.cuda.synchronize(ordinal)
    properties = torch.cuda.get_device_properties(ordinal)
    del probe
    return {
        "device": ordinal,
        "count": torch.cuda.device_count(),
        "name": properties.name,
        "uuid": str(getattr(properties, "uuid", "?")),
    }


def hold(spec: dict[str, Any]) -> dict[str, Any]:
    torch = None
    if spec["torch"]:
        import torch  # CUDA itself starts only in cuda_view, after the slot
    Path(spec["ready"]).touch()
    wait_for(Path(spec["go"]), float(spec["wait_s"]))
    start = time.monotonic()
    slots = gpu_slots.acquire_gpus(1, spec["lock_dir"], poll_seconds=POLL_S, folds_per_gpu=1)
    result: dict[str, Any] = {
        "slots": slots,
        "visible": os.environ.get(gpu_slots.VISIBLE_ENV),
        "waited_s": time.monotonic() - start,
        "acquired_at": time.time(),  # beside the other holder's: was its slot still held?
        "hold_s": float(spec["hold_s"]),
    }
    if torch is not None:
        result.update(cuda_view(torch))
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    result = hold(spec)
    tmp = Path(spec["result"] + ".tmp")
    tmp.write_text(json.dumps(result))
    tmp.replace(spec["result"])
    time.sleep(float(spec["hold_s"]))  # the other holder meets the slot taken meanwhile
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
