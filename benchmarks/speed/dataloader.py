#!/usr/bin/env python
"""Training loader + augmentation throughput per worker (batches/s), ours and upstream's.

Both run in one process with one numeric thread, i.e. what one data worker delivers: ours calls
``PatchLoader`` (with the training transforms and deep-supervision targets) directly; upstream's
``nnUNetTrainer.get_dataloaders()`` with ``nnUNet_n_proc_DA=0`` (SingleThreadedAugmenter, the
exact training pipeline). Runs alternate (ours, upstream, ours, ...) because the machine is noisy.

    python -m benchmarks.speed.dataloader -c 3d_fullres 2d --peer ~/.cache/nnunet-peer/venv
    python -m benchmarks.speed.dataloader --preprocessed $nnUNet_preprocessed/Dataset900_Synth \
        -c 3d_fullres

Without ``--preprocessed`` a synthetic dataset is generated and preprocessed with the CLI (ours,
and upstream's ``nnUNetv2_plan_and_preprocess`` for ``--peer``) in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.our_loader import build_ours

DATASET_ID = 978
DATASET = f"Dataset{DATASET_ID}_LoaderBench"

PEER_SCRIPT = r"""
import json, os, resource, sys, time
dataset, config, batches, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fold = sys.argv[5] if len(sys.argv) > 5 else '0'  # 'all': every case, no split file needed
fold = fold if fold == 'all' else int(fold)
os.environ['nnUNet_n_proc_DA'] = '0'
import torch
torch.set_num_threads(1)
from batchgenerators.utilities.file_and_folder_operations import load_json, join
from nnunetv2.paths import nnUNet_preprocessed
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
plans = load_json(join(nnUNet_preprocessed, dataset, 'nnUNetPlans.json'))
plans['continue_training'] = False
dataset_json = load_json(join(nnUNet_preprocessed, dataset, 'dataset.json'))
trainer = nnUNetTrainer(plans, config, fold, dataset_json, device=torch.device('cpu'))
trainer._set_batch_size_and_oversample()  # what initialize() does first (no network needed)
dl_tr, _ = trainer.get_dataloaders()
for _ in range(warmup):
    next(dl_tr)
start = time.perf_counter()
for _ in range(batches):
    batch = next(dl_tr)
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({'batches_per_s': batches / seconds, 'data': list(batch['data'].shape),
                  'peak_mb': peak_mb}))
"""


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(
            f"failed ({done.returncode}): {' '.join(command)}\n"
            f"{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return done.stdout


def prepare_ours(work: Path, args: argparse.Namespace) -> Path:
    """Synthesize a raw dataset and run fingerprint/plan/preprocess; returns the dataset folder.

    A ``--work`` folder that already holds them is reused.
    """
    raw, pre = work / "raw", work / "ours"
    if (pre / DATASET / "nnUNetPlans.json").is_file():
        return pre / DATASET
    print(f"preparing {args.num_training} cases of {args.shape} in {work} ...", flush=True)
    base = [sys.executable, "-m", "nnunet_core"]
    shape = [str(s) for s in args.shape]
    run([*base, "synthesize", "--output", str(raw / DATASET), "--num-training",
         str(args.num_training), "--num-test", "0", "--shape", *shape, "--force"])  # fmt: skip
    roots = ["-d", str(DATASET_ID), "--raw", str(raw), "--preprocessed", str(pre)]
    run([*base, "fingerprint", *roots, "-np", "2"])
    run([*base, "plan", *roots])
    run([*base, "preprocess", *roots, "-c", *args.configurations, "-np", "2", "--no-pbar"])
    return pre / DATASET


def peer_env(work: Path, venv: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        nnUNet_raw=str(work / "raw"),
        nnUNet_preprocessed=str(work / "peer"),
        nnUNet_results=str(work / "peer_results"),
        nnUNet_compile="false",
        PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
    )
    return env


def prepare_peer(work: Path, venv: Path, configurations: list[str]) -> dict[str, str]:
    env = peer_env(work, venv)
    (work / "peer").mkdir(exist_ok=True)
    if (work / "peer" / DATASET / "nnUNetPlans.json").is_file():
        return env
    print("upstream nnUNetv2_plan_and_preprocess ...", flush=True)
    command = [str(venv / "bin" / "nnUNetv2_plan_and_preprocess"), "-d", str(DATASET_ID)]
    run([*command, "-c", *configurations, "-np", "2", "--verify_dataset_integrity"], env)
    return env


def time_ours(make_batch, batches: int, warmup: int, start_iteration: int) -> dict:
    for k in range(warmup):
        make_batch(0, start_iteration + k)
    start = time.perf_counter()
    for k in range(batches):
        batch = make_batch(1, start_iteration + k)
    seconds = time.perf_counter() - start
    return {"batches_per_s": batches / seconds, "data": list(batch["data"].shape)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preprocessed", type=Path, help="our preprocessed dataset folder")
    parser.add_argument(
        "--raw", type=Path, help="its raw folder (needed for --peer with --preprocessed)"
    )
    parser.add_argument("-c", "--configurations", nargs="+", default=["3d_fullres", "2d"])
    parser.add_argument("--num-training", type=int, default=20)
    parser.add_argument("--shape", type=int, nargs="+", default=[48, 64, 64])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer", type=Path, help="upstream's venv (see ../shared/peer)")
    parser.add_argument("--work", type=Path, help="keep generated data here (default: temp)")
    args = parser.parse_args()

    from nnunet_core.training.workers import limit_threads

    limit_threads()  # one worker's worth of compute
    with tempfile.TemporaryDirectory(prefix="bench_dataloader_") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.preprocessed is None:
            dataset_folder = prepare_ours(work, args)
        else:
            dataset_folder = args.preprocessed
        env = None
        if args.peer is not None:
            if args.preprocessed is not None:
                if args.raw is None:
                    sys.exit("--peer with --preprocessed needs --raw (the nnU-Net raw root)")
                (work / "raw").mkdir(exist_ok=True)
                link = work / "raw" / DATASET
                if not link.exists():
                    link.symlink_to(args.raw.resolve())
            env = prepare_peer(work, args.peer, args.configurations)
        for configuration in args.configurations:
            loader = build_ours(dataset_folder, configuration)
            ours, peer = [], []
            for r in range(args.repeats):
                step = r * (args.batches + args.warmup)
                ours.append(time_ours(loader, args.batches, args.warmup, step))
                if env is not None:
                    python = str(args.peer / "bin" / "python")
                    out = run(
                        [python, "-c", PEER_SCRIPT, DATASET, configuration, str(args.batches),
                         str(args.warmup)], env)  # fmt: skip
                    peer.append(json.loads(out.strip().splitlines()[-1]))
            best = max(o["batches_per_s"] for o in ours)
            line = f"{configuration}: batch {ours[0]['data']}  ours {best:.1f} batches/s"
            if peer:
                best_peer = max(p["batches_per_s"] for p in peer)
                line += f"  upstream {best_peer:.1f} batches/s {peer[0]['data']}"
                line += f"  ratio {best / best_peer:.2f}x"
            runs = [round(o["batches_per_s"], 1) for o in ours]
            runs_peer = [round(p["batches_per_s"], 1) for p in peer]
            print(f"{line}  (runs: ours {runs}, upstream {runs_peer})", flush=True)


if __name__ == "__main__":
    main()
