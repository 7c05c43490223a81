#!/usr/bin/env python
"""Many new scans: the workflow's prediction mode (config ``predict:``, one shard job with every
case) beside upstream nnU-Net 2.8.1's ``nnUNetv2_predict_from_modelfolder`` on the CPU, on the
same cases with the same model, folds, mirroring and step size; one JSON record.

Per side: wall seconds of the whole command (ours: Snakemake planning, the shard job, the summary
job; upstream: its command), cases per hour, the peak summed RSS of the process tree (every
worker) and that peak above one process of the side with its prediction modules imported; and
how many voxels of the two sides' segmentations are equal (and, on the first cases, how many
when ours sums the tiles as upstream does: ``--fp16_accumulation``). Then (unless
``--no-profile``) a second run of our shard job with a timer around each step
(``profile``): where the seconds go. Cases and model: ``setup``; how
each side runs and is measured: ``sides``. ``ratio`` is ours / upstream (lower is
better).

    python -m benchmarks.speed.predict_many --quick --peer
    python -m benchmarks.speed.predict_many --peer ~/.cache/nnunet-peer/venv --cases 10
    python -m benchmarks.speed.predict_many --dataset IMAGES --model MODEL.zip --peer --cases 10
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.speed.predict_many import profile, sides
from benchmarks.speed.predict_many.setup import (
    Inputs,
    git_head,
    link_cases,
    synthetic_inputs,
    user_inputs,
)
from benchmarks.speed.realscale.record import (
    commit_description,
    machine_description,
    stage_entry,
    write_record,
)

REPO = Path(__file__).resolve().parents[3]
DEFAULT_PEER = Path.home() / ".cache" / "nnunet-peer" / "venv"
FULL = {"cases": 10, "slices": None, "mirroring": True}
CHECKED_CASES = 2  # cases of the float16-sums check
# --quick: under 10 minutes on 2 cores with the peer, setup and the profile run included:
# fewer slices and no test-time mirroring (8 network passes per tile on both sides otherwise)
QUICK = {"cases": 10, "slices": 24, "mirroring": False}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.predict_many", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK['cases']} cases of {QUICK['slices']} slices, no mirroring",
    )
    parser.add_argument(
        "--peer",
        nargs="?",
        type=Path,
        const=DEFAULT_PEER,
        help=f"run upstream too, from this venv (default {DEFAULT_PEER})",
    )
    parser.add_argument("--dataset", type=Path, help="a folder of your images (or imagesTs)")
    parser.add_argument("--model", type=Path, help="with --dataset: a model zip or model folder")
    parser.add_argument("--cases", type=int, help=f"cases to predict (default {FULL['cases']})")
    parser.add_argument("--slices", type=int, help="slices per synthetic case (default 80-120)")
    parser.add_argument(
        "--mirroring",
        action=argparse.BooleanOptionalAction,
        help="test-time mirroring on both sides (default: on, off with --quick)",
    )
    parser.add_argument(
        "--feature-divisor",
        type=int,
        default=32,
        help="synthetic model: the planned features per stage divided by this (default 32; "
        "at 32 the top stages have 2-4 channels, where torch convolves one tile with its slow "
        "3-D kernel and two with oneDNN; at 4 both take oneDNN, as with the planned network)",
    )
    parser.add_argument("--step-size", type=float, default=0.5)
    parser.add_argument(
        "--low-memory",
        action="store_true",
        help="ours with predict.low_memory (one tile per forward pass, as upstream)",
    )
    parser.add_argument("--cores", type=int, default=2, help="Snakemake --cores for ours")
    parser.add_argument("--no-profile", action="store_true", help="skip the profiled shard run")
    parser.add_argument("--work", type=Path, help="keep cases and model here (default: temp)")
    parser.add_argument(
        "--output",
        "--out",
        type=Path,
        help="the JSON record (default benchmarks/results/speed/"
        "predict_many[_quick]_<commit>.json)",
    )
    args = parser.parse_args(argv)
    if args.peer is not None and not (args.peer / "bin" / "nnUNetv2_predict").is_file():
        parser.error(f"--peer {args.peer}: no bin/nnUNetv2_predict (not an upstream venv)")
    if (args.dataset is None) != (args.model is None):
        parser.error("--dataset and --model go together")
    if args.feature_divisor < 1:
        parser.error(f"--feature-divisor must be at least 1, got {args.feature_divisor}")
    if args.cases is not None and args.cases < 1:
        parser.error(f"--cases must be at least 1, got {args.cases}")
    sizes = QUICK if args.quick else FULL
    args.cases = args.cases or sizes["cases"]
    args.slices = args.slices or sizes["slices"]
    args.mirroring = sizes["mirroring"] if args.mirroring is None else args.mirroring
    if args.output is None:
        name = f"predict_many{'_quick' if args.quick else ''}_{git_head(REPO)}.json"
        args.output = REPO / "benchmarks" / "results" / "speed" / name
    return args


def _fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def _side(measured: sides.Measured, imports_mb: float, cases: int) -> dict[str, Any]:
    return {
        "wall_s": round(measured.wall_s, 2),
        "cases_per_hour": round(cases * 3600 / measured.wall_s, 1),
        "peak_mb": round(measured.peak_rss_mb, 1),
        "imports_mb": round(imports_mb, 1),
        "peak_above_imports_mb": round(measured.peak_rss_mb - imports_mb, 1),
        "peak_pss_mb": round(measured.peak_pss_mb, 1),
        "processes_at_peak": measured.processes_at_peak,
        "max_processes": measured.max_processes,
        "cpu_s": round(measured.cpu_s, 1),
        "samples_lost": len(measured.sampling_errors),
        "sampling_errors": sorted(set(measured.sampling_errors))[:5],
        "load_before": None,
    }


def run_ours(inputs: Inputs, settings: dict, work: Path) -> tuple[sides.Measured, Path]:
    place = _fresh(work / "runs" / "ours")
    output = place / "segmentations"
    command = sides.our_command(inputs.ours_model, inputs.images, output, place / "work", settings)
    log("ours: " + shlex.join(command))
    return sides.measure(command, sides.clean_env(), place), output


def run_upstream(inputs: Inputs, settings: dict, peer: Path, work: Path):
    output = _fresh(work / "runs" / "upstream") / "segmentations"
    command = sides.upstream_command(peer, inputs.upstream_model, inputs.images, output, settings)
    log("upstream: " + shlex.join(command))
    measured = sides.measure(command, sides.upstream_env(peer, work), work / "runs" / "upstream")
    return measured, output


def upstream_sums_check(inputs: Inputs, settings: dict, upstream_output: Path, work: Path):
    """Our ``predict-from-modelfolder --fp16_accumulation`` (upstream's float16 sums, one tile
    per pass) on the first cases against upstream's segmentations: equal where the default's
    differences come from how the tiles are summed (float32 sums of tile pairs, ours)."""
    cases = inputs.cases[:CHECKED_CASES]
    folder = _fresh(work / "runs" / "upstream_sums")
    images = folder / "images"
    link_cases(inputs.images, images, inputs.ending, len(cases))
    command = [sys.executable, "-m", "nnunet_core", "predict-from-modelfolder", "-i",
               str(images), "-o", str(folder / "out"), "-m", str(inputs.ours_model), "-f",
               *settings["folds"], "-device", "cpu", "-step_size", str(settings["step_size"]),
               "--fp16_accumulation", "-npp", "0", "-nps", "0"]  # fmt: skip
    command += [] if settings["mirroring"] else ["--disable_tta"]
    log(f"ours with upstream's float16 sums on {len(cases)} case(s)")
    sides.measure(command, sides.clean_env(), folder)
    found = sides.agreement(folder / "out", upstream_output, cases, inputs.ending)
    return {"cases": list(cases), "equal_voxels": found["equal_voxels"]}


PLAN = r"""
import json, sys
from pathlib import Path
from nnunet_core.new_scans.plan import plan_run
predict, work_dir = json.loads(sys.argv[1]), Path(sys.argv[2])
run = plan_run(predict, work_dir)
print(json.dumps({"folder": str(run.folder), "shards": run.shards, "summary": run.summary}))
"""


def profile_ours(inputs: Inputs, settings: dict, work: Path) -> dict[str, Any]:
    """Our shard job once more, its steps timed; then the summary job, timed."""
    from nnunet_core.new_scans.plan import summary_marker

    place = _fresh(work / "runs" / "profile")
    predict = {
        "model": str(inputs.ours_model), "input": str(inputs.images),
        "output": str(place / "segmentations"), "cases_per_job": settings["cases_per_job"],
        "use_mirroring": settings["mirroring"], "step_size": settings["step_size"],
        "low_memory": settings["low_memory"], "device": "cpu",
        "folds": [int(f) if f.isdigit() else f for f in settings["folds"]],
    }  # fmt: skip
    env = sides.clean_env()
    plan_command = [sys.executable, "-c", PLAN, json.dumps(predict), str(place / "work")]
    planned = sides.measure(plan_command, env, place)
    run = json.loads(planned.output_tail.strip().splitlines()[-1])
    (shard,) = run["shards"]
    events = place / "events.jsonl"
    # what the workflow's rule sets for a CPU shard job with --cores N
    job_env = {**env, "OMP_NUM_THREADS": str(settings["cores"]), "OMP_WAIT_POLICY": "PASSIVE"}
    job = [sys.executable, "-m", profile.__name__, run["folder"], shard, str(events)]
    log(f"profile: shard {shard} with its steps timed")
    shard_run = sides.measure(job, job_env, place)
    marker = summary_marker(Path(run["folder"]), run["summary"])
    summary_command = [sys.executable, "-m", "nnunet_core.new_scans.summary", run["folder"],
                       str(marker)]  # fmt: skip
    summary_run = sides.measure(summary_command, env, place)
    return {
        "plan_s": round(planned.wall_s, 2),
        "shard_wall_s": round(shard_run.wall_s, 2),
        "shard_peak_mb": round(shard_run.peak_rss_mb, 1),
        "shard_peak_pss_mb": round(shard_run.peak_pss_mb, 1),
        "summary_s": round(summary_run.wall_s, 2),
        "steps": profile.summarize(events),
    }


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    started = time.perf_counter()
    commit = commit_description(REPO)
    if args.dataset is not None:
        inputs = user_inputs(args.dataset, args.model, args.cases, work, args.peer)
    else:
        inputs = synthetic_inputs(
            work, args.cases, args.slices, args.feature_divisor, args.peer, log
        )
    cases = len(inputs.cases)
    settings = {
        "cases_per_job": max(cases, 1), "mirroring": args.mirroring,
        "step_size": args.step_size, "folds": list(inputs.folds), "cores": args.cores,
        "low_memory": args.low_memory,
    }  # fmt: skip
    setup_s = time.perf_counter() - started
    log(f"{cases} case(s), folds {inputs.folds}, mirroring {args.mirroring}; setup {setup_s:.0f} s")
    folds = settings["folds"]
    ours_imports = sides.ready_mb(
        sys.executable, sides.OURS_READY, inputs.ours_model, folds, sides.clean_env()
    )
    load = {"ours": os.getloadavg()[0]}
    ours, ours_output = run_ours(inputs, settings, work)
    record_sides = {"ours": _side(ours, ours_imports, cases)}
    record_sides["ours"]["load_before"] = load["ours"]
    jobs = {name: ours.seconds_of(f"nnunet_core.new_scans.{name}") for name in ("shard", "summary")}
    record_sides["ours"]["jobs_s"] = {
        **jobs, "snakemake_rest": round(ours.wall_s - sum(v or 0 for v in jobs.values()), 2)
    }  # fmt: skip
    log(f"ours: {ours.wall_s:.1f} s, peak {ours.peak_rss_mb:.0f} MB")
    upstream = agreement = None
    if args.peer is not None:
        env = sides.upstream_env(args.peer, work)
        peer_python = str(args.peer / "bin" / "python")
        peer_imports = sides.ready_mb(
            peer_python, sides.UPSTREAM_READY, inputs.upstream_model, folds, env
        )
        load["upstream"] = os.getloadavg()[0]
        upstream, upstream_output = run_upstream(inputs, settings, args.peer, work)
        record_sides["upstream"] = _side(upstream, peer_imports, cases)
        record_sides["upstream"]["load_before"] = load["upstream"]
        log(f"upstream: {upstream.wall_s:.1f} s, peak {upstream.peak_rss_mb:.0f} MB")
        agreement = sides.agreement(ours_output, upstream_output, inputs.cases, inputs.ending)
        agreement["upstream_sums"] = upstream_sums_check(inputs, settings, upstream_output, work)
    stage = stage_entry(
        ours.wall_s, upstream.wall_s if upstream else None, ours.peak_rss_mb,
        upstream.peak_rss_mb if upstream else None,
        note=f"{cases} cases, one shard job (cases_per_job {settings['cases_per_job']}), "
        f"--cores {args.cores}; upstream -npp 3 -nps 3 (defaults), -device cpu",
    )  # fmt: skip
    if upstream:
        above = [record_sides[s]["peak_above_imports_mb"] for s in ("ours", "upstream")]
        stage["peak_above_imports_ratio"] = round(above[0] / above[1], 3)
        stage["peak_ratio"] = round(ours.peak_rss_mb / upstream.peak_rss_mb, 3)
    stage["ours_cases_per_hour"] = record_sides["ours"]["cases_per_hour"]
    stage["upstream_cases_per_hour"] = record_sides.get("upstream", {}).get("cases_per_hour")
    steps = None
    if not args.no_profile:
        steps = profile_ours(inputs, settings, work)
    return {
        "machine": machine_description(),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d"),
        "command": shlex.join(["python", "-m", "benchmarks.speed.predict_many", *sys.argv[1:]]),
        "dataset": inputs.description,
        "settings": {
            **settings,
            "quick": args.quick,
            "peer": str(args.peer or ""),
            "feature_divisor": None if args.dataset else args.feature_divisor,
        },  # fmt: skip
        "stages": {f"predict_{cases}_cases": stage},
        "sides": record_sides,
        "agreement": agreement,
        "profile_ours": steps,
        "setup_s": round(setup_s, 1),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # every child (our CLI, the profile driver) imports this checkout's code
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    work = (args.work or Path(tempfile.mkdtemp(prefix="predict_many_"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        record = run(args, work)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: record[k] for k in ("stages", "agreement")}, indent=1), flush=True)
    print(f"\ntotal {record['wall_s']:.0f} s", flush=True)
    write_record(args.output, record)
    print(f"record: {args.output}", flush=True)


if __name__ == "__main__":
    main()
