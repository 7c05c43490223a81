"""The real-scale loader stages: seconds per batch of ONE augmentation worker, ours and upstream's.

Each run is a fresh process per side (ours: ``python -m benchmarks.speed.realscale.loader``,
upstream's: speed/dataloader/run.py's trainer script with ``nnUNet_n_proc_DA=0``), alternating ours,
upstream, ours, ... because the machine is noisy. Both load the whole training set (upstream with
fold ``all``), use the plans' patch and batch size and the full training augmentation, one
numeric thread, and report their own peak RSS. The best (fastest) run counts; start-up and
``warmup`` batches are not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common.our_loader import build_ours
from benchmarks.common.peer.env import peer_environment
from benchmarks.speed.dataloader.run import PEER_SCRIPT, time_ours
from benchmarks.speed.preprocess import DATASET
from benchmarks.speed.realscale.record import stage_entry

# One worker is one core's worth of compute, on both sides.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def peer_env(work: Path, venv: Path) -> dict[str, str]:
    """Upstream's environment for a set's work folder (the trees preprocess wrote)."""
    env = peer_environment(
        venv, work / "raw", work / "peer_preprocessed", work / "peer_results",
        nnUNet_n_proc_DA="0", **ONE_THREAD,
    )  # fmt: skip
    env.pop("VIRTUAL_ENV", None)
    return env


def run_json(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one measuring process; its last stdout line is its JSON result."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout[-1500:] + done.stderr[-2500:]).strip()
        msg = f"failed ({done.returncode}): {' '.join(command[:4])} ...\n{tail}"
        raise RuntimeError(msg)
    return json.loads(done.stdout.strip().splitlines()[-1])


def ours_command(dataset_folder: Path, configuration: str, batches: int, warmup: int, run: int):
    return [
        sys.executable, "-m", "benchmarks.speed.realscale.loader", str(dataset_folder),
        configuration, str(batches), str(warmup), str(run),
    ]  # fmt: skip


def peer_command(venv: Path, configuration: str, batches: int, warmup: int) -> list[str]:
    python = str(venv / "bin" / "python")
    return [python, "-c", PEER_SCRIPT, DATASET, configuration, str(batches), str(warmup), "all"]


def loader_stage(
    ours_folder: Path,
    work: Path,
    peer_venv: Path | None,
    configuration: str,
    batches: int,
    repeats: int,
    warmup: int,
    log=print,
) -> dict[str, Any]:
    """The stage entry: best seconds per batch and peak MB per side, with the batch shape and
    whether the augmentation runs as dummy 2-D in its note."""
    ours_env = {**os.environ, **ONE_THREAD}
    ours_runs: list[dict[str, Any]] = []
    peer_runs: list[dict[str, Any]] = []
    for run in range(repeats):
        command = ours_command(ours_folder, configuration, batches, warmup, run)
        ours_runs.append(run_json(command, ours_env))
        line = f"  {configuration} run {run + 1}: ours {ours_runs[-1]['seconds_per_batch']:.3f}"
        if peer_venv is not None:
            command = peer_command(peer_venv, configuration, batches, warmup)
            result = run_json(command, peer_env(work, peer_venv))
            result["seconds_per_batch"] = 1.0 / result["batches_per_s"]
            peer_runs.append(result)
            line += f", upstream {result['seconds_per_batch']:.3f}"
        log(line + " s/batch")
    ours_best = min(r["seconds_per_batch"] for r in ours_runs)
    peer_best = min((r["seconds_per_batch"] for r in peer_runs), default=None)
    dummy = " (dummy 2-D augmentation)" if ours_runs[0]["dummy_2d"] else ""
    note = f"batch {ours_runs[0]['data']}{dummy}, best of {repeats} runs of {batches} batches"
    note += ", one worker"
    if peer_runs and peer_runs[0]["data"] != ours_runs[0]["data"]:
        note += f"; upstream's batch {peer_runs[0]['data']}"
    return stage_entry(
        ours_best,
        peer_best,
        max(r["peak_mb"] for r in ours_runs),
        max((r["peak_mb"] for r in peer_runs), default=None),
        note,
    )


def measure_ours(
    dataset_folder: Path, configuration: str, batches: int, warmup: int, run: int
) -> dict[str, Any]:
    """One run of our loader in this process: seconds per batch, batch shape, peak MB."""
    from nnunet_core.io.plans import Plans
    from nnunet_core.training.augmentation.pipeline import configure_augmentation
    from nnunet_core.training.data.workers import limit_threads

    limit_threads()
    make_batch = build_ours(dataset_folder, configuration)
    patch = list(
        Plans.load(dataset_folder / "nnUNetPlans.json").configuration(configuration).patch_size
    )
    timed = time_ours(make_batch, batches, warmup, run * (batches + warmup))
    return {
        "seconds_per_batch": 1.0 / timed["batches_per_s"],
        "data": timed["data"],
        "dummy_2d": bool(configure_augmentation(patch).do_dummy_2d),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="one run of our loader (realscale's worker)")
    parser.add_argument("dataset_folder", type=Path)
    parser.add_argument("configuration")
    parser.add_argument("batches", type=int)
    parser.add_argument("warmup", type=int)
    parser.add_argument("run", type=int)
    args = parser.parse_args()
    result = measure_ours(
        args.dataset_folder, args.configuration, args.batches, args.warmup, args.run
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
