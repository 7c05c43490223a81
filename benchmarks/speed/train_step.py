#!/usr/bin/env python
"""Seconds per training iteration (forward, deep-supervision loss, backward, clip, SGD step).

    python -m benchmarks.speed.train_step \
        --plans ../shared/reference/plans/synth3d_peer900/nnUNetPlans.json \
        -c 3d_fullres 2d --peer ~/.cache/nnunet-peer/venv

Ours: the trainer's own ``Trainer.train_step`` on random data of the plan's batch and patch size
(random labels, deep-supervision targets made as the loader makes them), so no dataset is needed;
on the CPU by default, on CUDA with AMP when available (``--device``). Threads: all CPU cores, as
``nnUNetv2_train -device cpu`` and upstream's harness use.

Upstream: ../shared/peer/bench_trainer.py (``train_step_s_median``, CPU only, no augmentation
workers so that nothing competes with the timed steps). It needs an upstream-preprocessed dataset:
a synthetic raw dataset (``nnunet-core synthesize``) is preprocessed by ``nnUNetv2_preprocess`` with
this very plans file. Runs alternate (ours, upstream, ...) because the machine is noisy; the best
median of each counts.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.common.random_training import make_trainer, time_ours
from nnunet_core.io.plans import Plans
from nnunet_core.model import count_parameters

HARNESS = Path(__file__).resolve().parents[3] / "shared" / "peer" / "bench_trainer.py"
DATASET_ID = 900


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(
            f"failed ({done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def peer_env(work: Path, venv: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PEER=str(work / "peer_home"),
        nnUNet_raw=str(work / "raw"),
        nnUNet_preprocessed=str(work / "peer"),
        nnUNet_results=str(work / "peer_results"),
        nnUNet_compile="false",
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
    )
    return env


def prepare_peer(work: Path, venv: Path, plans: dict, args: argparse.Namespace) -> dict:
    """Upstream-preprocessed synthetic data for exactly these plans (reused from ``--work``)."""
    env = peer_env(work, venv)
    name = f"Dataset{DATASET_ID:03d}_Synth"
    pre = work / "peer" / name
    if all((pre / Plans(plans).data_identifier_of(c)).is_dir() for c in args.configurations):
        return env
    raw = work / "raw" / name
    print(f"upstream preprocessing of {args.num_training} synthetic cases ...", flush=True)
    run([sys.executable, "-m", "nnunet_core", "synthesize", "--output", str(raw),
         "--num-training", str(args.num_training), "--num-test", "0",
         "--shape", *map(str, args.shape), "--force"])  # fmt: skip
    pre.mkdir(parents=True, exist_ok=True)
    (pre / "nnUNetPlans.json").write_text(json.dumps({**plans, "dataset_name": name}, indent=1))
    (pre / "dataset.json").write_bytes((raw / "dataset.json").read_bytes())
    (work / "peer_home" / "data").mkdir(parents=True, exist_ok=True)
    command = [str(venv / "bin" / "nnUNetv2_preprocess"), "-d", str(DATASET_ID), "-np", "2"]
    run([*command, "-plans_name", "nnUNetPlans", "-c", *args.configurations], env)
    return env


def time_peer(configuration: str, work: Path, venv: Path, env: dict, iterations: int) -> dict:
    out = work / f"peer_{configuration}.json"
    command = [str(venv / "bin" / "python"), str(HARNESS), str(DATASET_ID), configuration]
    run([*command, "--batches", "1", "--iters", str(iterations), "--nproc", "0",
         "--out", str(out)], env)  # fmt: skip
    result = json.loads(out.read_text())
    return {
        "median": result["train_step_s_median"],
        "all": result["train_step_s_all"][1:],
        "n_params": result["n_params"],
        "batch": [result["batch_size"], *result["patch_size"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plans", type=Path, required=True, help="plans file (nnUNetPlans.json)")
    parser.add_argument("-c", "--configurations", nargs="+", default=["3d_fullres", "2d"])
    parser.add_argument("--iterations", type=int, default=5, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="runs of ours and upstream each")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda if available")
    parser.add_argument("--peer", type=Path, help="upstream's venv (see ../shared/peer)")
    parser.add_argument("--num-training", type=int, default=6, help="synthetic cases for --peer")
    parser.add_argument("--shape", type=int, nargs=3, default=[48, 64, 64], help="their size")
    parser.add_argument("--work", type=Path, help="keep generated data here (default: temp)")
    args = parser.parse_args()
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        torch.set_num_threads(multiprocessing.cpu_count())
    plans = json.loads(args.plans.read_text())

    with tempfile.TemporaryDirectory(prefix="bench_train_step_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        env = prepare_peer(work, args.peer, plans, args) if args.peer else None
        amp = " + AMP" if device.type == "cuda" else f", {torch.get_num_threads()} threads"
        print(f"device {device}{amp}", flush=True)
        for configuration in args.configurations:
            trainer = make_trainer(plans, configuration, device, work / "ours")
            ours, peer = [], []
            for _ in range(args.repeats):
                ours.append(time_ours(trainer, args.iterations, args.warmup))
                if env is not None:
                    peer.append(time_peer(configuration, work, args.peer, env, args.iterations))
            best = min(o["median"] for o in ours)
            batch = [trainer.batch_size, *trainer.patch_size]
            line = (
                f"{configuration}: batch x patch {batch}, "
                f"{count_parameters(trainer.network):,} params"
            )
            line += f" | ours {best:.3f} s/it"
            if peer:
                best_peer = min(p["median"] for p in peer)
                line += (
                    f" | upstream {best_peer:.3f} s/it "
                    f"({peer[0]['n_params']:,} params, {peer[0]['batch']})"
                )
                line += f" | ours/upstream {best / best_peer:.2f}"
            runs = [round(o["median"], 3) for o in ours]
            print(
                f"{line}  (medians: ours {runs}, upstream {[p['median'] for p in peer]})",
                flush=True,
            )


if __name__ == "__main__":
    main()
