#!/usr/bin/env python
"""The whole pipeline, ours against upstream's, on the same raw dataset and the same schedule.

    .venv/bin/python -m benchmarks.speed.pipeline --peer ~/.cache/nnunet-peer/venv \
        --configurations 2d 3d_fullres --folds 0 1 2 3 4 \
        --epochs 5 --iterations 20 --val-iterations 5 --cores 2 --repeats 1 \
        --out pipeline.json --work /tmp/pipeline_bench

Ours: the real workflow (`snakemake --cores N --configfile <generated>`), stages taken from its
jobs. Upstream: its CLI chain (`nnUNetv2_plan_and_preprocess --verify_dataset_integrity`,
`nnUNetv2_train --npz` per configuration and fold, N at a time as our workflow runs them,
`nnUNetv2_find_best_configuration`, then the commands its inference_instructions.txt prints:
`nnUNetv2_predict` (-device cpu), `nnUNetv2_ensemble` when a pair won,
`nnUNetv2_apply_postprocessing`, `nnUNetv2_evaluate_folder`). Per stage and in total: wall
seconds, CPU seconds (user + system of the process tree), peak summed RSS (MB), ours/upstream.
Runs alternate (ours, upstream, ours, ...) because the machine is shared and noisy; the table
shows the median of the repeats. Ours alone reports `report` (upstream has no such stage).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.speed.pipeline.ours import OursRun, run_ours
from benchmarks.speed.pipeline.stages import format_table, ratio_rows
from benchmarks.speed.pipeline.upstream import Schedule, UpstreamRun, run_upstream

DATASET_ID, DATASET_NAME = 900, "Synth"
DATASET = f"Dataset{DATASET_ID:03d}_{DATASET_NAME}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.pipeline", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--peer", type=Path, required=True, help="upstream nnU-Net's venv")
    parser.add_argument("--configurations", nargs="+", default=["2d", "3d_fullres"])
    parser.add_argument("--folds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--val-iterations", type=int, default=5)
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores; parallel folds")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--num-training", type=int, default=10, help="cases (demo: 10)")
    parser.add_argument("--num-test", type=int, default=3)
    parser.add_argument("--shape", nargs="+", type=int, default=[24, 48, 48])
    parser.add_argument(
        "--sides",
        nargs="+",
        default=["ours", "upstream"],
        choices=["ours", "upstream"],
        help="which to run (first starts)",
    )
    parser.add_argument(
        "--peer-env",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of upstream's commands, e.g. nnUNet_def_n_proc=2 (default: "
        "none, i.e. upstream's defaults as a user gets them)",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    return parser.parse_args(argv)


def synthesize(args: argparse.Namespace) -> Path:
    """One raw dataset for both sides, by our generator (copied into each run folder)."""
    target = args.work / "raw" / DATASET
    if not (target / "dataset.json").exists():
        subprocess.run(
            [
                str(Path(sys.executable).parent / "nnunet-core"),
                "synthesize",
                "--output",
                str(target),
                "--force",
                "--num-training",
                str(args.num_training),
                "--num-test",
                str(args.num_test),
                "--shape",
                *map(str, args.shape),
            ],
            check=True,
        )
    return target


def make_runs(args: argparse.Namespace, repeat: int) -> tuple[OursRun, UpstreamRun]:
    schedule = Schedule(args.epochs, args.iterations, args.val_iterations)
    shared = dict(
        dataset=DATASET,
        dataset_id=DATASET_ID,
        configurations=tuple(args.configurations),
        folds=tuple(args.folds),
        schedule=schedule,
        cores=args.cores,
    )
    ours = OursRun(root=args.work / f"ours_{repeat}", dataset_name=DATASET_NAME, **shared)
    extra_env = tuple(tuple(item.split("=", 1)) for item in args.peer_env)
    upstream = UpstreamRun(
        peer=args.peer, root=args.work / f"upstream_{repeat}", extra_env=extra_env, **shared
    )
    return ours, upstream


def median_stages(runs: list[dict]) -> dict[str, dict]:
    """Per stage and figure, the median over the repeats."""
    names = {name for run in runs for name in run["stages"]}
    merged = {}
    for name in names:
        values = [run["stages"][name] for run in runs if name in run["stages"]]
        merged[name] = {
            key: statistics.median(v[key] for v in values) for key in ("wall_s", "cpu_s", "peak_mb")
        }
    return merged


def loadavg() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.work = args.work.resolve()
    raw = synthesize(args)
    results: dict[str, list[dict]] = {"ours": [], "upstream": []}
    for repeat in range(args.repeats):
        ours, upstream = make_runs(args, repeat)
        order = args.sides if repeat % 2 == 0 else list(reversed(args.sides))
        for side in order:
            load, started = loadavg(), time.time()
            try:
                result = run_ours(ours, raw) if side == "ours" else run_upstream(upstream, raw)
            except RuntimeError as error:  # a failed side is reported, the other still runs
                print(f"{side} repeat {repeat} failed: {error}", flush=True)
                continue
            result.update(repeat=repeat, loadavg_start=load, loadavg_end=loadavg(), started=started)
            results[side].append(result)
            print(f"{side} repeat {repeat}: {result['stages']['total']}", flush=True)
            write_report(args, results)
    print(format_table(write_report(args, results)))
    return 0


def write_report(args: argparse.Namespace, results: dict[str, list[dict]]) -> list[dict]:
    """The JSON report of the runs so far (written after each run: a long benchmark that dies
    keeps what it measured); returns the table's rows."""
    medians = {side: median_stages(runs) for side, runs in results.items() if runs}
    rows = ratio_rows(medians.get("ours", {}), medians.get("upstream", {}))
    report = {
        "argv": sys.argv,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "table": rows,
        "runs": results,
    }
    args.out.write_text(json.dumps(report, indent=1))
    return rows


if __name__ == "__main__":
    sys.exit(main())
