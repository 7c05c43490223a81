#!/usr/bin/env python
"""Training loader + augmentation throughput per worker (batches/s), ours and upstream's.

Both run in one process with one numeric thread, i.e. what one data worker delivers: ours calls
``PatchLoader`` (with the training transforms and deep-supervision targets) directly; upstream's
``nnUNetTrainer.get_dataloaders()`` with ``nnUNet_n_proc_DA=0`` (SingleThreadedAugmenter, the
exact training pipeline). Runs alternate (ours, upstream, ours, ...) because the machine is noisy.

    python -m benchmarks.speed.dataloader -c 3d_fullres 2d --peer ~/.cache/nnunet-peer/venv
    python -m benchmarks.speed.dataloader --preprocessed $nnUNet_preprocessed/Dataset900_Synth \
        -c 3d_fullres
    python -m benchmarks.speed.dataloader --preset mr --num-training 3 --work /tmp/loader_mr \
        -c 3d_fullres 3d_lowres 2d --batches 20 --warmup 2 --repeats 2 --breakdown \
        --peer ~/.cache/nnunet-peer/venv

Without ``--preprocessed`` a synthetic dataset is generated and preprocessed with the CLI (ours,
and upstream's ``nnUNetv2_plan_and_preprocess`` for ``--peer``) in a temporary folder: the toy
phantoms of ``--shape``, or with ``--preset mr|ct`` the real-size sets of ``nnunet-core
synthesize --preset`` (256^3 at 1 mm; 512x512xN at 0.7x0.7x2.5 mm). Each line gives batches/s
and seconds per batch of both sides and their ratio (ours_s / upstream_s, lower is better).
``--breakdown`` adds where the time goes, ms per batch: ours by part (a cProfile of one repeat's
batches), upstream's by transform (each batchgeneratorsv2 transform timed, the rest is reading
and collating); ``--profile FILE`` keeps our pstats file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common.our_loader import build_ours
from benchmarks.common.peer.env import peer_environment
from benchmarks.speed.dataloader.parts import (
    PEER_TIMING,
    format_parts,
    our_parts,
    profile_batches,
    top_functions,
)

DATASET_ID = 978
DATASET = f"Dataset{DATASET_ID}_LoaderBench"

PEER_SCRIPT = r"""
import json, os, resource, sys, time
dataset, config, batches, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fold = sys.argv[5] if len(sys.argv) > 5 else '0'  # 'all': every case, no split file needed
fold = fold if fold == 'all' else int(fold)
timing = sys.argv[6] if len(sys.argv) > 6 else ''  # parts.PEER_TIMING
os.environ['nnUNet_n_proc_DA'] = '0'
import torch
if timing:
    exec(timing)
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
if timing:
    SPENT.clear()
start = time.perf_counter()
for _ in range(batches):
    batch = next(dl_tr)
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
parts = {}
if timing:
    parts = {k: v / batches for k, v in sorted(SPENT.items(), key=lambda kv: -kv[1])}
    parts['reading, cropping, collating'] = seconds / batches - sum(parts.values())
    parts['total'] = seconds / batches
print(json.dumps({'batches_per_s': batches / seconds, 'data': list(batch['data'].shape),
                  'peak_mb': peak_mb, 'parts': parts}))
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

    A ``--work`` folder that already holds them is reused (configurations it lacks are
    preprocessed).
    """
    raw, pre = work / "raw", work / "ours"
    base = [sys.executable, "-m", "nnunet_core"]
    roots = ["-d", str(DATASET_ID), "--raw", str(raw), "--preprocessed", str(pre)]
    if not (pre / DATASET / "nnUNetPlans.json").is_file():
        kind = args.preset or f"toy {args.shape}"
        print(f"preparing {args.num_training} cases ({kind}) in {work} ...", flush=True)
        make_raw_dataset(raw / DATASET, args)
        run([*base, "fingerprint", *roots, "-np", "2"])
        run([*base, "plan", *roots])
    missing = unprepared(pre / DATASET, args.configurations)
    if missing:
        run([*base, "preprocess", *roots, "-c", *missing, "-np", "2", "--no-pbar"])
    return pre / DATASET


def unprepared(folder: Path, configurations: list[str]) -> list[str]:
    """The configurations whose preprocessed folder is missing (planned or not: the
    preprocessing names an unplanned one)."""
    return [c for c in configurations if not (folder / f"nnUNetPlans_{c}").is_dir()]


def make_raw_dataset(folder: Path, args: argparse.Namespace) -> None:
    """The raw dataset: ``--preset``'s real-size set, else toy phantoms of ``--shape``."""
    command = [sys.executable, "-m", "nnunet_core", "synthesize", "--output", str(folder),
               "--num-training", str(args.num_training), "--num-test", "0", "--force"]  # fmt: skip
    if args.preset:
        command += ["--preset", args.preset]
        if args.slices:
            command += ["--slices", str(args.slices)]
    else:
        command += ["--shape", *(str(s) for s in args.shape)]
    run(command)


def peer_env(work: Path, venv: Path) -> dict[str, str]:
    return peer_environment(venv, work / "raw", work / "peer", work / "peer_results")


def prepare_peer(work: Path, venv: Path, configurations: list[str]) -> dict[str, str]:
    env = peer_env(work, venv)
    (work / "peer").mkdir(exist_ok=True)
    folder = work / "peer" / DATASET
    if not (folder / "nnUNetPlans.json").is_file():
        print("upstream nnUNetv2_plan_and_preprocess ...", flush=True)
        command = [str(venv / "bin" / "nnUNetv2_plan_and_preprocess"), "-d", str(DATASET_ID)]
        run([*command, "-c", *configurations, "-np", "2", "--verify_dataset_integrity"], env)
    missing = unprepared(folder, configurations)
    if missing:
        command = [str(venv / "bin" / "nnUNetv2_preprocess"), "-d", str(DATASET_ID)]
        run([*command, "-c", *missing, "-np", "2"], env)
    write_peer_split(folder)
    return env


def write_peer_split(folder: Path) -> None:
    """Fold 0 trains on every case, as our loader here does (upstream cannot split fewer than
    five cases into five folds; its first case is fold 0's validation case)."""
    cases = sorted({p.name.removesuffix("_seg.b2nd") for p in folder.glob("*/*_seg.b2nd")})
    split = [{"train": cases, "val": cases[:1]}] * 5
    (folder / "splits_final.json").write_text(json.dumps(split, indent=1))


def time_ours(make_batch, batches: int, warmup: int, start_iteration: int) -> dict:
    for k in range(warmup):
        make_batch(0, start_iteration + k)
    start = time.perf_counter()
    for k in range(batches):
        batch = make_batch(1, start_iteration + k)
    seconds = time.perf_counter() - start
    return {"batches_per_s": batches / seconds, "data": list(batch["data"].shape)}


def run_peer(args: argparse.Namespace, env: dict[str, str], configuration: str) -> dict:
    python = str(args.peer / "bin" / "python")
    command = [python, "-c", PEER_SCRIPT, DATASET, configuration, str(args.batches),
               str(args.warmup), "0"]  # fmt: skip
    if args.breakdown:
        command.append(PEER_TIMING)
    return json.loads(run(command, env).strip().splitlines()[-1])


def result_line(configuration: str, ours: list[dict], peer: list[dict]) -> str:
    """Best of the runs: batches/s and s per batch of each side, the ratio of seconds."""
    best = max(o["batches_per_s"] for o in ours)
    line = f"{configuration}: batch {ours[0]['data']}  ours {best:.2f} batches/s ({1 / best:.3f} s)"
    if peer:
        best_peer = max(p["batches_per_s"] for p in peer)
        line += f"  upstream {best_peer:.2f} batches/s ({1 / best_peer:.3f} s) {peer[0]['data']}"
        line += f"  ratio {best_peer / best:.2f} (ours_s / upstream_s; {best / best_peer:.2f}x)"
    runs = [round(o["batches_per_s"], 2) for o in ours]
    runs_peer = [round(p["batches_per_s"], 2) for p in peer]
    return f"{line}  (runs: ours {runs}, upstream {runs_peer})"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.dataloader", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--preprocessed", type=Path, help="our preprocessed dataset folder")
    parser.add_argument(
        "--raw", type=Path, help="its raw folder (needed for --peer with --preprocessed)"
    )
    parser.add_argument("-c", "--configurations", nargs="+", default=["3d_fullres", "2d"])
    parser.add_argument("--num-training", type=int, default=20)
    parser.add_argument("--shape", type=int, nargs="+", default=[48, 64, 64])
    parser.add_argument("--preset", choices=["mr", "ct"], help="real-size data instead of --shape")
    parser.add_argument("--slices", type=int, help="slices per case of --preset ct")
    parser.add_argument("--breakdown", action="store_true", help="where the time goes, per part")
    parser.add_argument("--profile", type=Path, help="write our pstats (first configuration)")
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peer", type=Path, help="upstream's venv (see ../shared/peer)")
    parser.add_argument("--work", type=Path, help="keep generated data here (default: temp)")
    args = parser.parse_args()

    from nnunet_core.training.data.workers import limit_threads

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
            for _ in range(args.repeats):  # the same batches each time: best of = least noise
                ours.append(time_ours(loader, args.batches, args.warmup, 0))
                if env is not None:
                    peer.append(run_peer(args, env, configuration))
            print(result_line(configuration, ours, peer), flush=True)
            if args.breakdown or args.profile:
                stats = profile_batches(loader, list(range(args.batches)))  # the timed batches
                if args.profile and configuration == args.configurations[0]:
                    stats.dump_stats(str(args.profile))
                if args.breakdown:
                    parts = our_parts(stats, args.batches)
                    print(format_parts(parts, peer[-1]["parts"] if peer else None))
                    print(top_functions(stats, args.batches), flush=True)


if __name__ == "__main__":
    main()
