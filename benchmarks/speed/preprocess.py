#!/usr/bin/env python
"""Fingerprint + plan + preprocess throughput, ours and (optionally) upstream nnU-Net side by side.

Generates a synthetic raw dataset (size from flags), runs each step as the user would (the CLI, in
subprocesses) and prints cases/s, wall seconds and the peak RSS of the whole process tree. With
``--peer VENV`` (see ../shared/peer/README.md) upstream's nnUNetv2_* commands run on the same data
with the same process count, alternating with ours, and the ratio is printed.

    python -m benchmarks.speed.preprocess --num-training 20 --shape 48 64 64 -np 2 \
        --peer ~/.cache/nnunet-peer/venv --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DATASET_ID = 977
DATASET = f"Dataset{DATASET_ID}_Bench"
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root_pid: int) -> int:
    """Summed RSS in bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(stat[1]), []).append(int(entry))
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except OSError:
            pass
    return total


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Run a command; return (wall seconds, peak process-tree RSS in bytes)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = process.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"failed ({process.returncode}): {' '.join(command)}\n{output.decode()[-3000:]}")
    return wall, peak


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children and theirs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_steps(steps: dict[str, list[str]], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds per step and in total, peak RSS, and the CPU seconds of all steps (which,
    unlike wall time, other work on a shared machine barely changes)."""
    result: dict[str, float] = {"peak_rss_mb": 0.0, "total_s": 0.0}
    cpu = children_cpu_s()
    for name, command in steps.items():
        wall, peak = timed(command, env)
        result[f"{name}_s"] = round(wall, 2)
        result["total_s"] = round(result["total_s"] + wall, 2)
        result["peak_rss_mb"] = max(result["peak_rss_mb"], round(peak / 2**20, 1))
    result["cpu_s"] = round(children_cpu_s() - cpu, 1)
    return result


def ours(
    work: Path, configurations: list[str], processes: int
) -> tuple[dict[str, list[str]], dict]:
    pre = work / "ours_preprocessed"
    shutil.rmtree(pre, ignore_errors=True)
    base = [sys.executable, "-m", "nnunet_core"]
    roots = ["--raw", str(work / "raw"), "--preprocessed", str(pre)]
    steps = {
        "fingerprint": [*base, "fingerprint", "-d", str(DATASET_ID), *roots, "-np", str(processes)],
        "plan": [*base, "plan", "-d", str(DATASET_ID), *roots],
        "preprocess": [
            *base,
            "preprocess",
            "-d",
            str(DATASET_ID),
            *roots,
            "-c",
            *configurations,
            "-np",
            str(processes),
        ],
    }
    return steps, dict(os.environ)


def upstream(work: Path, peer_venv: Path, configurations: list[str], processes: int):
    pre = work / "peer_preprocessed"
    shutil.rmtree(pre, ignore_errors=True)
    pre.mkdir()
    env = dict(os.environ)
    env.update(
        nnUNet_raw=str(work / "raw"),
        nnUNet_preprocessed=str(pre),
        nnUNet_results=str(work / "peer_results"),
        PATH=f"{peer_venv / 'bin'}{os.pathsep}{env['PATH']}",
    )
    bin_dir = peer_venv / "bin"
    steps = {
        "fingerprint": [
            str(bin_dir / "nnUNetv2_extract_fingerprint"),
            "-d",
            str(DATASET_ID),
            "-np",
            str(processes),
        ],
        "plan": [str(bin_dir / "nnUNetv2_plan_experiment"), "-d", str(DATASET_ID)],
        "preprocess": [
            str(bin_dir / "nnUNetv2_preprocess"),
            "-d",
            str(DATASET_ID),
            "-c",
            *configurations,
            "-np",
            *[str(processes)] * len(configurations),
            "--no_pbar",
        ],
    }
    return steps, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-training", type=int, default=20)
    parser.add_argument("--shape", type=int, nargs="+", default=[48, 64, 64])
    parser.add_argument("--spacing", type=float, nargs="+", default=[2.5, 0.78, 0.78])
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("-np", "--num-processes", type=int, default=2)
    parser.add_argument("-c", "--configurations", nargs="+", default=["2d", "3d_fullres"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--peer", type=Path, help="upstream nnU-Net venv (../shared/peer/setup.sh)")
    parser.add_argument("--keep", type=Path, help="work folder to keep (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench_pp_"))
    raw = work / "raw" / DATASET
    if not raw.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nnunet_core",
                "synthesize",
                "--output",
                str(raw),
                "--num-training",
                str(args.num_training),
                "--num-test",
                "0",
                "--shape",
                *map(str, args.shape),
                "--spacing",
                *map(str, args.spacing),
                "--channels",
                str(args.channels),
            ],
            check=True,
            capture_output=True,
        )
    runs: dict[str, list[dict]] = {"ours": [], "upstream": []}
    for repeat in range(args.repeats):
        steps, env = ours(work, args.configurations, args.num_processes)
        runs["ours"].append(run_steps(steps, env))
        print(f"[{repeat + 1}] ours     {runs['ours'][-1]}", flush=True)
        if args.peer:
            steps, env = upstream(work, args.peer, args.configurations, args.num_processes)
            runs["upstream"].append(run_steps(steps, env))
            print(f"[{repeat + 1}] upstream {runs['upstream'][-1]}", flush=True)

    summary = {
        "cases": args.num_training,
        "shape": args.shape,
        "processes": args.num_processes,
        "configurations": args.configurations,
    }
    for who, results in runs.items():
        if results:
            best = min(results, key=lambda r: r["total_s"])
            summary[who] = {**best, "cases_per_s": round(args.num_training / best["total_s"], 2)}
    if runs["upstream"]:
        summary["speedup_vs_upstream"] = round(
            summary["upstream"]["total_s"] / summary["ours"]["total_s"], 2
        )
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
