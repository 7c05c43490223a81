#!/usr/bin/env python
"""Segmentation quality of N seeds of ours against N runs of upstream, same data and schedule.

    nice -n 10 python -m benchmarks.quality.quality --peer ~/.cache/nnunet-peer/venv --seeds 3 \
        --sets 2d 3d --epochs 10 5 --iterations 10 10 --work /tmp/quality --out quality.json

Data: one synthetic raw dataset per set (``nnunet-core synthesize``; ``2d`` with ``--2d``), organ
(1) and a small lesion (2), with held-out imagesTs/labelsTs, written once under ``--work/raw``.
Both sides plan and preprocess that same raw folder with their own planner
(``nnunet-core plan-and-preprocess``, ``nnUNetv2_plan_and_preprocess``); the plan fields that
shape training (patch, batch, spacing, normalisation, network) must be equal, else it stops.

Training, fold 0, on the CPU: ours ``nnunet-core train D C 0 --epochs E --iterations I
--val-iterations V --seed S`` with S = 0..N-1. Upstream has no seed flag: each
``nnUNetv2_train D C 0 -tr nnUNetTrainer_QualityExIvV -device cpu`` process draws its own
torch and numpy seeds from the OS (torch 2.13 seeds its default generator per process, and
batchgenerators seeds the augmentation workers from numpy's global state), so N processes are
N independent runs: initialisation, sampling and augmentation all differ. The trainer class,
nnUNetTrainer with only the schedule changed and its final validation skipped (unused here; it
costs minutes per run on a loaded CPU), is written into the peer venv's training/nnUNetTrainer/
folder at run time (as ../shared/peer/setup.sh installs PeerTiny). Ours still runs its final
validation (it has no switch for it); it cannot change the trained weights.
Both sides run as a user would: torch's default threads (all cores), the same
``$nnUNet_n_proc_DA`` augmentation workers (``--da-workers``) and ``$nnUNet_def_n_proc`` /
``-npp``/``-nps`` (``--processes``), one run at a time, alternating (ours seed 0, upstream run 0,
ours seed 1, ...), so that machine load hits both alike. Dice does not depend on speed: one
invocation per set may run beside another, and the whole under ``nice -n 10``.

Quality: the fold-0 model of each run predicts imagesTs (``nnunet-core predict -f 0`` /
``nnUNetv2_predict -f 0``, default mirroring), and our ``nnunet-core evaluate`` scores both
against labelsTs, so only the models differ. Per class: test Dice mean, sd (ddof=1) and min per
side, and the first epoch (0-based, as both logs count) at which the pseudo Dice (the ``Pseudo
dice`` line both logs print) passes 0.5. Tests between the sides: Mann-Whitney U on the Dice,
Brown-Forsythe on its spread, Fisher's exact test on the runs that learned the class and
Mann-Whitney U on that first epoch. Records are written to ``--out``
after each run; a rerun with the same ``--out`` skips the runs already there (same set and
schedule), and ``--report`` only prints the tables of every set and schedule it holds. A second
invocation beside the first takes other run numbers (``--start``) and its own ``--out``;
``--merge`` adds its records to the first file afterwards. The pure parts: quality_stats.py; how
each side runs: sides.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common.peer.trainer import install_trainer_source, trainer_source
from benchmarks.quality.quality_stats import (
    format_table,
    learned_epochs,
    presence_split,
    read_pseudo_dice,
    summarise,
)
from benchmarks.quality.sides import base_env, ours_cli, run, side_env, snapshot_code
from nnunet_core.io.atomic import write_text

DATASETS = {"2d": (951, "QualitySynth2d", "2d"), "3d": (952, "QualitySynth3d", "3d_fullres")}
PLAN_FIELDS = (
    "patch_size",
    "batch_size",
    "spacing",
    "normalization_schemes",
    "use_mask_for_norm",
    "architecture",
    "resampling_fn_data_kwargs",
    "resampling_fn_seg_kwargs",
)


def synthesize(args: argparse.Namespace, kind: str) -> Path:
    """The set's raw dataset, written once (the same arrays for the same flags)."""
    number, name, _ = DATASETS[kind]
    raw = args.work / "raw" / f"Dataset{number}_{name}"
    if (raw / "dataset.json").is_file():
        return raw
    command = [*ours_cli(), "synthesize", "--output", str(raw), "--seed", "0", "--num-training",
               str(args.num_training), "--num-test", str(args.num_test)]  # fmt: skip
    if kind == "2d":
        command.append("--2d")
    run(command, base_env(args), args.work / "logs" / f"synthesize_{kind}.txt")
    return raw


def preprocess(args: argparse.Namespace, kind: str, side: str) -> dict[str, Any]:
    """Plan and preprocess the set with the side's own planner (once); returns its plans."""
    number, name, configuration = DATASETS[kind]
    folder = args.work / side / "preprocessed" / f"Dataset{number}_{name}"
    plans = folder / "nnUNetPlans.json"
    if not plans.is_file() or not any(folder.glob("nnUNetPlans_*")):
        if side == "ours":
            command = [*ours_cli(), "plan-and-preprocess", "-d", str(number), "-c", configuration,
                       "-np", "2", "--no-pbar"]  # fmt: skip
        else:
            command = [str(args.peer / "bin" / "nnUNetv2_plan_and_preprocess"), "-d",
                       str(number), "-c", configuration, "-np", "2"]  # fmt: skip
        env = side_env(args, side, args.work / side / "results")
        run(command, env, args.work / "logs" / f"preprocess_{kind}_{side}.txt")
    return json.loads(plans.read_text())


def check_plans(kind: str, ours: dict[str, Any], upstream: dict[str, Any]) -> None:
    """Same plans on both sides: the fields that shape training must be equal."""
    configuration = DATASETS[kind][2]
    mine, theirs = ours["configurations"][configuration], upstream["configurations"][configuration]
    different = [f for f in PLAN_FIELDS if mine.get(f) != theirs.get(f)]
    if ours.get("transpose_forward") != upstream.get("transpose_forward"):
        different.append("transpose_forward")
    if different:
        details = "; ".join(f"{f}: ours {mine.get(f)} upstream {theirs.get(f)}" for f in different)
        sys.exit(f"{kind}: the plans differ: {details}")
    print(f"{kind}: plans equal ({', '.join(PLAN_FIELDS)}, transpose_forward)", flush=True)


def peer_trainer(args: argparse.Namespace, schedule: dict[str, int]) -> str:
    """Install upstream's trainer class for this schedule into the peer venv; its name.
    Its final validation is skipped: the benchmark scores the test set."""
    name = "nnUNetTrainer_Quality{epochs}x{iterations}v{val_iterations}".format(**schedule)
    source = trainer_source(
        name, **schedule, writer="benchmarks/quality/quality.py", skip_final_validation=True
    )
    install_trainer_source(args.peer, name, source)
    return name


def fold_folder(results: Path, configuration: str) -> Path:
    """The one trained fold_0 of a results root (trainer names differ per side)."""
    found = sorted(results.glob(f"Dataset*/*__{configuration}/fold_0"))
    if len(found) != 1:
        sys.exit(f"expected one fold_0 for {configuration} under {results}, found {found}")
    return found[0]


def train_and_predict(args, kind, side, index, schedule, trainer) -> dict[str, Any]:
    """One run: train fold 0, predict imagesTs, evaluate with our code; the run's record."""
    number, _, configuration = DATASETS[kind]
    run_dir = args.work / side / f"{kind}_{schedule_key(schedule)}_run{index}"
    results = run_dir / "results"
    env = side_env(args, side, results)
    logs = args.work / "logs" / f"{kind}_{schedule_key(schedule)}_{side}_{index}"  # per schedule
    dataset = str(number)
    if side == "ours":
        train = [*ours_cli(), "train", dataset, configuration, "0", "-device", "cpu", "--epochs",
                 str(schedule["epochs"]), "--iterations", str(schedule["iterations"]), "--seed",
                 str(index), "--val-iterations", str(schedule["val_iterations"])]  # fmt: skip
        predict = [*ours_cli(), "predict", "-d", dataset, "-c", configuration, "-f", "0",
                   "-device", "cpu", "--disable_progress_bar"]  # fmt: skip
    else:
        train = [str(args.peer / "bin" / "nnUNetv2_train"), dataset, configuration, "0",
                 "-tr", trainer, "-device", "cpu"]  # fmt: skip
        predict = [str(args.peer / "bin" / "nnUNetv2_predict"), "-d", dataset, "-c",
                   configuration, "-f", "0", "-tr", trainer, "-device", "cpu",
                   "--disable_progress_bar"]  # fmt: skip
    start = time.time()
    run(train, env, logs.with_name(logs.name + "_train.txt"))
    train_s = time.time() - start
    raw = args.work / "raw" / f"Dataset{number}_{DATASETS[kind][1]}"
    predictions = run_dir / "test_predictions"
    processes = ["-npp", str(args.processes), "-nps", str(args.processes)]
    run([*predict, *processes, "-i", str(raw / "imagesTs"), "-o", str(predictions)], env,
        logs.with_name(logs.name + "_predict.txt"))  # fmt: skip
    summary = run_dir / "test_summary.json"
    run([*ours_cli(), "evaluate", str(raw / "labelsTs"), str(predictions), "-djfile",
         str(raw / "dataset.json"), "-o", str(summary), "-np", "1"], env,
        logs.with_name(logs.name + "_evaluate.txt"))  # fmt: skip
    test = json.loads(summary.read_text())
    means = test["mean"]
    curve = read_pseudo_dice(fold_folder(results, configuration))
    return {
        "set": kind,
        "side": side,
        "run": index,
        "schedule": schedule,
        "code": args.commit if side == "ours" else "nnunetv2 2.8.1",
        "test_dice": {label: values["Dice"] for label, values in means.items()},
        "pseudo_dice": curve,
        "learned": learned_epochs(curve),
        "by_presence": presence_split(test),
        "train_s": round(train_s, 1),
        "folder": str(run_dir),
    }


def schedule_key(schedule: dict[str, int]) -> str:
    return "{epochs}x{iterations}v{val_iterations}".format(**schedule)


def schedules(args: argparse.Namespace) -> dict[str, dict[str, int]]:
    """Each set's schedule: one value for all sets, or one per set in ``--sets`` order."""
    out = {}
    for position, kind in enumerate(args.sets):
        out[kind] = {
            key: getattr(args, key)[min(position, len(getattr(args, key)) - 1)]
            for key in ("epochs", "iterations", "val_iterations")
        }
    return out


def load_records(path: Path) -> list[dict[str, Any]]:
    if path.is_file():
        return json.loads(path.read_text()).get("runs", [])
    return []


def write_out(path: Path, records: list[dict[str, Any]], args, tables: dict) -> None:
    """Runs and tables; the command is the one that made runs (a --report keeps it)."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    command = old.get("command") if args.report and old.get("command") else " ".join(sys.argv)
    content = {
        "command": command,
        "da_workers": args.da_workers,
        "runs": records,
        "summary": tables,
    }
    merged = old.get("merged_commands", []) + getattr(args, "merged_commands", [])
    if merged:  # each once, in the order merged (a report writes after every schedule)
        content["merged_commands"] = list(dict.fromkeys(merged))
    write_text(path, json.dumps(content, indent=1))


def run_identity(record: dict[str, Any]) -> tuple:
    return record["set"], record["side"], record["run"], schedule_key(record["schedule"])


def merge_records(records: list[dict[str, Any]], files: list[Path]) -> list[str]:
    """Add the runs of other --out files (a second process's) that ``records`` lacks; a run
    recorded in both is kept once, as ``records`` has it. Returns those files' commands."""
    known = {run_identity(r) for r in records}
    commands = []
    for path in files:
        content = json.loads(path.read_text())
        for record in content.get("runs", []):
            if run_identity(record) not in known:
                known.add(run_identity(record))
                records.append(record)
        commands.append(content.get("command", str(path)))
    return commands


def label_names(raw: Path, records: list[dict[str, Any]]) -> dict[str, str]:
    """Label value -> name from the set's dataset.json; "label N" where the raw set is gone
    (a record read on another machine)."""
    if (raw / "dataset.json").is_file():
        labels = json.loads((raw / "dataset.json").read_text())["labels"]
        return {str(v): k for k, v in labels.items() if int(v) != 0}
    values = sorted({label for r in records for label in r["test_dice"]}, key=int)
    return {value: f"label {value}" for value in values}


def recorded_schedules(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, int]]]:
    """Every (set, schedule) the records hold, in the order first recorded."""
    seen: list[tuple[str, dict[str, int]]] = []
    for record in records:
        if (record["set"], record["schedule"]) not in seen:
            seen.append((record["set"], record["schedule"]))
    return seen


def report(records, kind, schedule, raw: Path) -> tuple[str, list[dict[str, Any]]]:
    mine = [r for r in records if r["set"] == kind and r["schedule"] == schedule]
    names = label_names(raw, mine)
    for record in mine:  # runs recorded before by_presence existed: from their test summary
        test = Path(record["folder"]) / "test_summary.json"
        if "by_presence" not in record and test.is_file():
            record["by_presence"] = presence_split(json.loads(test.read_text()))
    rows = summarise(mine, names)
    title = f"set {kind}, {schedule_key(schedule)} (epochs x iterations, val iterations)"
    return format_table(title, rows), rows


def run_set(args, kind, schedule, sides, records, tables) -> None:
    """Data, plans and the alternating runs of one set; records are saved after each run."""
    synthesize(args, kind)
    plans = {side: preprocess(args, kind, side) for side in sides}
    if args.peer:
        check_plans(kind, plans["ours"], plans["upstream"])
    trainer = peer_trainer(args, schedule) if args.peer else ""
    for index in range(args.start, args.start + args.seeds):
        for side in sides:
            done = [r for r in records if (r["set"], r["side"], r["run"]) == (kind, side, index)
                    and r["schedule"] == schedule]  # fmt: skip
            if done:
                continue
            print(f"{kind} {side} run {index} ({schedule_key(schedule)}) ...", flush=True)
            record = train_and_predict(args, kind, side, index, schedule, trainer)
            print(f"  test Dice {record['test_dice']}, learned at {record['learned']}, "
                  f"train {record['train_s']} s", flush=True)  # fmt: skip
            records.append(record)
            write_out(args.out, records, args, tables)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", type=Path, help="upstream's venv; without it only ours runs")
    parser.add_argument("--seeds", type=int, default=3, help="runs per side and set")
    parser.add_argument(
        "--start", type=int, default=0, help="first run number (the seed of our first run)"
    )
    parser.add_argument("--sets", nargs="+", choices=sorted(DATASETS), default=["2d", "3d"])
    parser.add_argument("--epochs", type=int, nargs="+", default=[10], help="one, or per set")
    parser.add_argument("--iterations", type=int, nargs="+", default=[10], help="per epoch")
    parser.add_argument("--val-iterations", type=int, nargs="+", default=[5], help="per epoch")
    parser.add_argument("--num-training", type=int, default=20, help="synthetic training cases")
    parser.add_argument("--num-test", type=int, default=8, help="synthetic test cases")
    parser.add_argument("--da-workers", type=int, default=2, help="$nnUNet_n_proc_DA, both sides")
    parser.add_argument(
        "--processes", type=int, default=2, help="$nnUNet_def_n_proc, -npp/-nps of predict"
    )
    parser.add_argument("--work", type=Path, required=True, help="data, models and logs")
    parser.add_argument("--out", type=Path, default=Path("quality.json"))
    parser.add_argument(
        "--report",
        action="store_true",
        help="only print the tables of every set and schedule recorded in --out",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=[],
        help="with --report: add the runs of these --out files (another process's) to --out",
    )
    args = parser.parse_args()
    args.work = args.work.resolve()
    args.peer = args.peer.expanduser().resolve() if args.peer else None
    sides = ["ours", "upstream"] if args.peer else ["ours"]
    if not args.report:
        args.code, args.commit = snapshot_code(args.work)
        print(f"our code: {args.commit} (copy in {args.code})", flush=True)
    if args.merge and not args.report:
        parser.error("--merge goes with --report")
    records = load_records(args.out)
    args.merged_commands = merge_records(records, args.merge)
    tables: dict[str, Any] = {}
    wanted = recorded_schedules(records) if args.report else list(schedules(args).items())
    for kind, schedule in wanted:
        raw = args.work / "raw" / "Dataset{}_{}".format(*DATASETS[kind][:2])
        if not args.report:
            run_set(args, kind, schedule, sides, records, tables)
        table, rows = report(records, kind, schedule, raw)
        tables[f"{kind}_{schedule_key(schedule)}"] = rows
        print(table, flush=True)
        write_out(args.out, records, args, tables)


if __name__ == "__main__":
    main()
