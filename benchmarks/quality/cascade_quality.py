#!/usr/bin/env python
"""Cross-validation Dice of the cascade (3d_lowres -> 3d_cascade_fullres), ours against upstream.

    nice -n 10 python -m benchmarks.quality.cascade_quality --peer ~/.cache/nnunet-peer/venv \
        --runs 2 --epochs 5 --iterations 10 --val-iterations 3 --work /tmp/cascade_quality \
        --out cascade_quality.json

Data: one synthetic raw 3-D set (``nnunet-core synthesize --shape 40 48 48 --spacing 1 1 1``,
organ 1 and lesion 2), planned and preprocessed by each side's own planner with a GPU memory
target of ``--gpu-memory-target`` GB (0.02), small enough that both plan a cascade for these
small images: ``3d_lowres`` with ``next_stage`` and ``3d_cascade_fullres``. The plan fields that
shape training must be equal on both sides for both stages, else it stops.

One run of a side trains, on the CPU with the same schedule, the five ``3d_lowres`` folds (whose
final validations write ``predicted_next_stage/3d_cascade_fullres``), then the five
``3d_cascade_fullres`` folds, which read those files. Ours: ``nnunet-core train D C F --epochs E
--iterations I --val-iterations V --seed R``; upstream: ``nnUNetv2_train D C F -tr
nnUNetTrainer_Cascade{E}x{I}v{V}`` (nnUNetTrainer with only the schedule changed, written into the
peer venv by ``common/peer/trainer.py``), whose seeds the OS draws per process. Runs alternate
(ours 0, upstream 0, ours 1, ...) so that machine load hits both alike.

Quality: each fold's final validation ``summary.json`` (Dice per class over that fold's validation
cases, same metric code on each side) pooled as the cross-validation mean per class, for both
stages. Per side: mean and sd over runs. Target (issue 12): our cascade mean Dice within 0.02 of
upstream's for every class. The same runs are also split, over the validation cases of all
folds, into the Dice where the reference has the class and the voxels predicted on the cases
without it (the lesion-free case scores 0 for one stray voxel). Records are saved after each run;
a rerun with the same ``--out`` skips finished runs, ``--report`` only prints the tables (and
adds the split to older records whose run folder is still under ``--work``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common.peer.trainer import install_trainer_source, trainer_source
from benchmarks.quality.quality_stats import describe_presence, presence_split
from benchmarks.quality.sides import ours_cli, run, side_env, snapshot_code

NUMBER, NAME = 953, "CascadeQuality"
STAGES = ("3d_lowres", "3d_cascade_fullres")
# 3d_cascade_fullres inherits patch, spacing and network from 3d_fullres: compared there
PLANNED = (*STAGES, "3d_fullres")
FOLDS = range(5)
PLAN_FIELDS = (
    "patch_size",
    "batch_size",
    "spacing",
    "normalization_schemes",
    "architecture",
    "previous_stage",
    "next_stage",
)
TOLERANCE = 0.02


def synthesize(args: argparse.Namespace) -> Path:
    raw = args.work / "raw" / f"Dataset{NUMBER}_{NAME}"
    if not (raw / "dataset.json").is_file():
        command = [*ours_cli(), "synthesize", "--output", str(raw), "--seed", "0",
                   "--num-training", str(args.num_training), "--num-test", "1", "--shape", "40",
                   "48", "48", "--spacing", "1", "1", "1"]  # fmt: skip
        run(command, side_env(args, "ours", args.work / "ours" / "unused"),
            args.work / "logs" / "synthesize.txt")  # fmt: skip
    return raw


def preprocess(args: argparse.Namespace, side: str) -> dict[str, Any]:
    """Plans and the 3d_lowres and 3d_fullres data (the cascade trains on 3d_fullres's)."""
    folder = args.work / side / "preprocessed" / f"Dataset{NUMBER}_{NAME}"
    plans = folder / "nnUNetPlans.json"
    if not plans.is_file() or len(list(folder.glob("nnUNetPlans_*"))) < 2:
        target = ["-gpu_memory_target", str(args.gpu_memory_target)]
        if side == "ours":
            command = [*ours_cli(), "plan-and-preprocess", "-d", str(NUMBER), *target, "-c",
                       "3d_lowres", "3d_fullres", "-np", "2", "--no-pbar"]  # fmt: skip
        else:
            command = [str(args.peer / "bin" / "nnUNetv2_plan_and_preprocess"), "-d",
                       str(NUMBER), *target, "-c", "3d_lowres", "3d_fullres",
                       "-np", "2"]  # fmt: skip
        env = side_env(args, side, args.work / side / "unused")
        run(command, env, args.work / "logs" / f"preprocess_{side}.txt")
    return json.loads(plans.read_text())


def check_plans(ours: dict[str, Any], upstream: dict[str, Any]) -> None:
    """Both sides plan the cascade, and the same one."""
    different = []
    for stage in PLANNED:
        mine = ours["configurations"].get(stage)
        theirs = upstream["configurations"].get(stage)
        if mine is None or theirs is None:
            sys.exit(f"{stage}: planned by ours {mine is not None}, upstream {theirs is not None}")
        different += [f"{stage}.{f}: ours {mine.get(f)} upstream {theirs.get(f)}"
                      for f in PLAN_FIELDS if mine.get(f) != theirs.get(f)]  # fmt: skip
    if different:
        sys.exit("the plans differ: " + "; ".join(different))
    for stage in PLANNED:
        shown = {f: ours["configurations"][stage].get(f) for f in ("patch_size", "spacing")}
        print(f"{stage}: equal on both sides, {shown}", flush=True)


def train_commands(args, side: str, stage: str, fold: int, run_index: int, trainer: str):
    if side == "ours":
        return [*ours_cli(), "train", str(NUMBER), stage, str(fold), "-device", "cpu",
                "--epochs", str(args.epochs), "--iterations", str(args.iterations),
                "--val-iterations", str(args.val_iterations), "--seed",
                str(run_index * 10 + fold)]  # fmt: skip
    return [str(args.peer / "bin" / "nnUNetv2_train"), str(NUMBER), stage, str(fold), "-tr",
            trainer, "-device", "cpu"]  # fmt: skip


def fold_summary(results: Path, stage: str, fold: int) -> Path:
    """The ``summary.json`` of one fold's final validation."""
    found = sorted(results.glob(f"Dataset*/*__{stage}/fold_{fold}/validation/summary.json"))
    if len(found) != 1:
        sys.exit(f"expected one {stage} fold {fold} summary.json under {results}, found {found}")
    return found[0]


def fold_dice(results: Path, stage: str, fold: int) -> dict[str, float]:
    """Per-class Dice of one fold's final validation (``summary.json``'s ``mean``)."""
    means = json.loads(fold_summary(results, stage, fold).read_text())["mean"]
    return {label: float(values["Dice"]) for label, values in means.items()}


def stage_presence(results: Path, stage: str) -> dict[str, dict[str, Any]]:
    """Per class over the validation cases of all five folds (each training case once): the
    Dice where the reference has the class, and the voxels predicted where it has none. The
    lesion-free case scores 0 for one stray voxel; this tells that from a worse segmentation."""
    cases: list[dict[str, Any]] = []
    for fold in FOLDS:
        summary = json.loads(fold_summary(results, stage, fold).read_text())
        cases += summary["metric_per_case"]
    return presence_split({"metric_per_case": cases})


def run_results(args: argparse.Namespace, side: str, run_index: int) -> Path:
    return args.work / side / f"run{run_index}" / "results"


def fill_presence(args: argparse.Namespace, records: list[dict[str, Any]]) -> None:
    """Records written before ``by_presence`` existed: from their run's folder, when its
    summaries still give the recorded cross-validation Dice (the folder is that run's)."""
    for record in records:
        results = run_results(args, record["side"], record["run"])
        if "by_presence" in record or not results.is_dir():
            continue
        try:
            dice = {stage: [fold_dice(results, stage, fold) for fold in FOLDS] for stage in STAGES}
        except SystemExit:  # a fold missing: not a finished run's folder
            continue
        same = all(
            abs(statistics.fmean(d[label] for d in dice[stage]) - value) < 1e-9
            for stage in STAGES
            for label, value in record[stage].items()
        )
        if same:
            record["by_presence"] = {stage: stage_presence(results, stage) for stage in STAGES}


def one_run(args, side: str, run_index: int, trainer: str) -> dict[str, Any]:
    """Five lowres folds then five cascade folds; the per-stage cross-validation Dice.

    A run not yet in ``--out`` starts from an empty results folder: folds left by a stopped
    run (or by older code) would otherwise count as trained.
    """
    results = run_results(args, side, run_index)
    shutil.rmtree(results, ignore_errors=True)
    env = side_env(args, side, results)
    record: dict[str, Any] = {"side": side, "run": run_index, "schedule": schedule(args)}
    record["code"] = args.commit if side == "ours" else "nnunetv2 2.8.1"
    start = time.time()
    for stage in STAGES:
        per_fold = []
        for fold in FOLDS:
            log = args.work / "logs" / f"{side}_run{run_index}_{stage}_fold{fold}.txt"
            run(train_commands(args, side, stage, fold, run_index, trainer), env, log)
            per_fold.append(fold_dice(results, stage, fold))
            print(f"  {side} run {run_index} {stage} fold {fold}: {per_fold[-1]}", flush=True)
        labels = per_fold[0].keys()
        record[stage] = {label: statistics.fmean(d[label] for d in per_fold) for label in labels}
    record["by_presence"] = {stage: stage_presence(results, stage) for stage in STAGES}
    record["wall_s"] = round(time.time() - start, 1)
    return record


def schedule(args: argparse.Namespace) -> dict[str, int]:
    return {"epochs": args.epochs, "iterations": args.iterations,
            "val_iterations": args.val_iterations}  # fmt: skip


def summary_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per stage and class: each side's mean, sd (ddof=1) and runs; the difference."""
    rows = []
    for stage in STAGES:
        labels = sorted({label for r in records for label in r.get(stage, {})})
        for label in labels:
            row: dict[str, Any] = {"stage": stage, "class": label}
            for side in ("ours", "upstream"):
                values = [r[stage][label] for r in records if r["side"] == side]
                row[side] = {
                    "n": len(values),
                    "mean": statistics.fmean(values) if values else None,
                    "sd": statistics.stdev(values) if len(values) > 1 else None,
                    "values": [round(v, 4) for v in values],
                }
                split = [r["by_presence"][stage][label] for r in records
                         if r["side"] == side and "by_presence" in r]  # fmt: skip
                row[side].update(describe_presence(split))
            if row["ours"]["n"] and row["upstream"]["n"]:
                delta = row["ours"]["mean"] - row["upstream"]["mean"]
                row["ours_minus_upstream"] = delta
                row["within_tolerance"] = abs(delta) <= TOLERANCE
            rows.append(row)
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    def cell(side: dict[str, Any]) -> str:
        if not side["n"]:
            return "-"
        sd = f" ± {side['sd']:.4f}" if side["sd"] is not None else ""
        return f"{side['mean']:.4f}{sd} (n={side['n']})"

    lines = [f"{'stage':<20}{'class':<7}{'ours':<28}{'upstream':<28}ours - upstream"]
    for row in rows:
        delta = row.get("ours_minus_upstream")
        shown = f"{delta:+.4f}" if delta is not None else "-"
        lines.append(
            f"{row['stage']:<20}{row['class']:<7}{cell(row['ours']):<28}"
            f"{cell(row['upstream']):<28}{shown}"
        )
    lines += ["", "split by the cases that have the class and those without (runs with the split):"]
    lines.append(
        f"{'stage':<20}{'class':<7}{'ours where present':<28}{'upstream where present':<28}"
        "voxels where absent, per run: ours / upstream"
    )
    for row in rows:
        ours, upstream = row["ours"], row["upstream"]
        lines.append(
            f"{row['stage']:<20}{row['class']:<7}{cell(ours['dice_where_present']):<28}"
            f"{cell(upstream['dice_where_present']):<28}"
            f"{ours['false_voxels']} / {upstream['false_voxels']}"
        )
    return "\n".join(lines)


def save(path: Path, records: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    old = json.loads(path.read_text()) if path.is_file() else {}
    command = old.get("command") if "--report" in sys.argv else " ".join(sys.argv)
    path.write_text(json.dumps({"command": command, "runs": records, "summary": rows}, indent=1))


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """The training schedule and worker counts, the same for both sides (also fold_repeats.py)."""
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=10, help="per epoch")
    parser.add_argument("--val-iterations", type=int, default=3, help="per epoch")
    parser.add_argument("--da-workers", type=int, default=2, help="$nnUNet_n_proc_DA, both sides")
    parser.add_argument("--processes", type=int, default=2, help="$nnUNet_def_n_proc")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", type=Path, help="upstream's venv; without it only ours runs")
    parser.add_argument("--runs", type=int, default=2, help="runs per side")
    add_schedule_arguments(parser)
    parser.add_argument("--num-training", type=int, default=10, help="synthetic training cases")
    parser.add_argument("--gpu-memory-target", type=float, default=0.02, help="GB, both planners")
    parser.add_argument("--work", type=Path, required=True, help="data, models and logs")
    parser.add_argument("--out", type=Path, default=Path("cascade_quality.json"))
    parser.add_argument("--report", action="store_true", help="only print the table of --out")
    args = parser.parse_args()
    args.work = args.work.resolve()
    args.peer = args.peer.expanduser().resolve() if args.peer else None
    sides = ["ours", "upstream"] if args.peer else ["ours"]
    args.code, args.commit = snapshot_code(args.work)
    records = json.loads(args.out.read_text())["runs"] if args.out.is_file() else []
    records = [r for r in records if r["schedule"] == schedule(args)]
    fill_presence(args, records)
    if not args.report:
        synthesize(args)
        plans = {side: preprocess(args, side) for side in sides}
        if args.peer:
            check_plans(plans["ours"], plans["upstream"])
        name = "nnUNetTrainer_Cascade{epochs}x{iterations}v{val_iterations}".format(
            **schedule(args)
        )
        if args.peer:
            source = trainer_source(
                name, **schedule(args), writer="benchmarks/quality/cascade_quality.py"
            )
            install_trainer_source(args.peer, name, source)
        for index in range(args.runs):
            for side in sides:
                if any((r["side"], r["run"]) == (side, index) for r in records):
                    continue
                print(f"{side} run {index} ...", flush=True)
                records.append(one_run(args, side, index, name))
                save(args.out, records, summary_rows(records))
    rows = summary_rows(records)
    print(format_rows(rows), flush=True)
    save(args.out, records, rows)


if __name__ == "__main__":
    main()
