#!/usr/bin/env python
"""One fold trained again and again per side: how often it predicts a label a case lacks.

    taskset -c 0 python -m benchmarks.quality.fold_repeats --side ours --work /tmp/cascade_quality \
        --peer ~/.cache/nnunet-peer/venv --stage 3d_lowres --fold 3 --repeats 10 --out DIR
    taskset -c 1 python -m benchmarks.quality.fold_repeats --side upstream ...   (same arguments)
    python -m benchmarks.quality.fold_repeats --report --out DIR

Issue 12: in ``benchmarks/quality/cascade_quality.py`` our 3d_lowres fold 3, whose validation holds
the one lesion-free case, put lesion voxels on that case in most runs and upstream's in none. Those
runs were few, and ours reused the seeds of earlier runs (``--seed run * 10 + fold``), so they were
not independent draws (14 repeats per side then found upstream doing it too, less often). A whole
cascade run takes over an hour; one fold takes minutes. This trains only ``--stage`` ``--fold`` on
cascade_quality.py's ``--work`` (its preprocessed data, its schedule; ours with seeds 1000 +
repeat, upstream's drawn by the OS) and records, per repeat, the fold's Dice per class and, per
validation case, each label's reference and predicted voxel counts. ``--report`` prints per side
the mean and sd of the Dice, how many repeats put a label on a case without it (Fisher's exact test
between the sides) and how many voxels they put there (Mann-Whitney U test). One process per side
(they can run at once on two cores); each writes ``--out``/<side>.json after every repeat and skips
the repeats already there. A second process of a side takes other repeat numbers (``--start``) and
its own file (<side>_from<start>.json); the report pools a side's files. ``--our-augmentation``
(upstream's side) swaps upstream's training transforms for ours inside upstream's trainer: if the
false voxels follow the transforms, the swapped runs look like ours; give it its own ``--out`` and
compare with ``--report --out SWAP --ours-from DIR``. ``--our-loader`` swaps upstream's whole batch
pipeline (sampling, transforms, deep-supervision targets) for ours instead; with ``--our-init``
also our seed (1000 + repeat) and the initial weights our trainer draws from it, so that repeat k
of upstream's trainer sees the very batches and start of our repeat k: what differs then is the
training itself. ``--our-init`` alone keeps upstream's loader and swaps only the initial weights
(those of our seed ``--seed-base`` + repeat): whether the start decides the rate. """

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scipy import stats

from benchmarks.common.peer.trainer import install_trainer_source, trainer_source
from benchmarks.quality.cascade_quality import (
    NUMBER,
    add_schedule_arguments,
    schedule,
    train_commands,
)
from benchmarks.quality.sides import run, side_env, snapshot_code
from nnunet_core.io.atomic import write_text

SEED_BASE = 1000  # apart from cascade_quality.py's seeds (run * 10 + fold)
SIDES = ("ours", "upstream")
# upstream's trainer class per swap (nnUNetTrainer_<kind><schedule>): each swap its own class file
TRAINER_KINDS = {None: "Cascade", "our_augmentation": "OurDA", "our_loader": "OurDL",
                 "our_loader_and_init": "OurDLInit", "our_init": "OurInit"}  # fmt: skip


def case_counts(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Per validation case: each label's reference and predicted voxel counts."""
    return [
        {
            "case": Path(entry["reference_file"]).name.split(".")[0],
            "labels": {label: [m["n_ref"], m["n_pred"]] for label, m in entry["metrics"].items()},
        }
        for entry in summary["metric_per_case"]
    ]


def false_labels(cases: list[dict[str, Any]]) -> list[str]:
    """The labels predicted on some case whose reference has none of them."""
    labels = sorted({label for case in cases for label in case["labels"]})
    return [label for label in labels if false_voxels(cases, label) > 0]


def swap(args: argparse.Namespace) -> str | None:
    """Which part of our pipeline goes into upstream's trainer, if any."""
    if args.our_loader:
        return "our_loader_and_init" if args.our_init else "our_loader"
    if args.our_init:
        return "our_init"
    return "our_augmentation" if args.our_augmentation else None


def variant(args: argparse.Namespace) -> str:
    """The side, the swap if any and a seed base other than the default, in folder names."""
    name = f"{args.side}_{swap(args)}" if swap(args) else args.side
    return name if args.seed_base == SEED_BASE else f"{name}_seeds{args.seed_base}"


def one_repeat(args: argparse.Namespace, repeat: int, trainer: str) -> dict[str, Any]:
    """Train the fold once into a fresh results folder; its Dice and voxel counts."""
    results = args.work / args.side / f"fold_repeats_{variant(args)}" / f"r{repeat}" / "results"
    shutil.rmtree(results, ignore_errors=True)
    command = train_commands(args, args.side, args.stage, args.fold, 0, trainer)
    if args.side == "ours":
        command[command.index("--seed") + 1] = str(args.seed_base + repeat)
    log = args.work / "logs" / f"repeat_{variant(args)}_{args.stage}_fold{args.fold}_r{repeat}.txt"
    start = time.time()
    env = side_env(args, args.side, results)
    if args.our_loader:  # our copy of the same preprocessed cases (identical arrays)
        data = args.work / "ours" / "preprocessed" / f"Dataset{NUMBER}_CascadeQuality"
        env["NNUNET_CORE_SWAP_DATA"] = str(data / f"nnUNetPlans_{args.stage}")
    if args.our_init:  # our repeat's initial weights (and, with our loader, its batches)
        env["NNUNET_CORE_SWAP_SEED"] = str(args.seed_base + repeat)
        init = results.parent / "initial_weights.pth"
        write_our_initial_weights(args, args.seed_base + repeat, init)
        env["NNUNET_CORE_SWAP_INIT"] = str(init)
    run(command, env, log)
    found = list(results.glob(f"Dataset*/*__{args.stage}/fold_{args.fold}/validation/summary.json"))
    if len(found) != 1:
        sys.exit(f"{results}: expected one validation summary.json, found {found}")
    summary = json.loads(found[0].read_text())
    return {
        "repeat": repeat,
        "dice": {label: float(m["Dice"]) for label, m in summary["mean"].items()},
        "cases": case_counts(summary),
        "wall_s": round(time.time() - start, 1),
    }


def write_our_initial_weights(args: argparse.Namespace, seed: int, path: Path) -> None:
    """The network our trainer starts from with ``seed`` (upstream's parameter names)."""
    import torch

    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.layout.roots import Roots
    from nnunet_core.model import checkpoint
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots(preprocessed=args.work / "ours" / "preprocessed", results=path.parent / "ours")
    setup = prepare_fold(roots, f"Dataset{NUMBER}_CascadeQuality", args.stage, args.fold,
                         "nnUNetPlans", "nnUNetTrainer")  # fmt: skip
    trainer = Trainer(setup, TrainerSettings(seed=seed), torch.device("cpu"))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint.network_weights(trainer.network), path)


def false_voxels(cases: list[dict[str, Any]], label: str) -> int:
    """Voxels of ``label`` predicted on the cases whose reference has none."""
    return sum(c["labels"][label][1] for c in cases if c["labels"][label][0] == 0)


def side_rows(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per class the Dice's mean and sd; how many repeats put a label on a case without it and
    how many voxels each repeat put there."""
    labels = sorted({label for r in records for label in r["dice"]})
    dice = {}
    for label in labels:
        values = [r["dice"][label] for r in records]
        dice[label] = {"mean": statistics.fmean(values),
                       "sd": statistics.stdev(values) if len(values) > 1 else None}  # fmt: skip
    false = {label: sum(label in false_labels(r["cases"]) for r in records) for label in labels}
    voxels = {label: [false_voxels(r["cases"], label) for r in records] for label in labels}
    return {"n": len(records), "dice": dice, "false_positive_runs": false,
            "false_voxels": voxels}  # fmt: skip


def report(out: Path, ours_from: Path | None = None) -> dict[str, Any]:
    """Both sides' rows and, per label, Fisher's exact test on the runs with false voxels and
    the Mann-Whitney U test on their counts."""
    table: dict[str, Any] = {}
    for side in SIDES:
        folder = ours_from if side == "ours" and ours_from else out
        files = [folder / f"{side}.json", *sorted(folder.glob(f"{side}_from*.json"))]
        repeats = [r for f in files if f.is_file() for r in json.loads(f.read_text())["repeats"]]
        if repeats:
            table[side] = side_rows(repeats)
    if len(table) == 2:
        ours, upstream = table["ours"], table["upstream"]
        table["fisher_p"], table["mann_whitney_p"] = {}, {}
        for label in ours["false_positive_runs"]:
            a, b = ours["false_positive_runs"][label], upstream["false_positive_runs"].get(label, 0)
            contingency = [[a, ours["n"] - a], [b, upstream["n"] - b]]
            table["fisher_p"][label] = float(stats.fisher_exact(contingency).pvalue)
            mine, theirs = ours["false_voxels"][label], upstream["false_voxels"][label]
            same = set(mine) | set(theirs) == {0}  # nothing to rank: the test is undefined
            table["mann_whitney_p"][label] = (
                1.0 if same else float(stats.mannwhitneyu(mine, theirs).pvalue)
            )
    return table


def format_report(table: dict[str, Any]) -> str:
    lines = [
        f"{'side':<10}{'n':>3}  {'class':<6}{'Dice mean ± sd':<20}false-positive runs, "
        "voxels per run (mean)"
    ]
    for side in SIDES:
        if side not in table:
            continue
        row = table[side]
        for label, dice in row["dice"].items():
            sd = f" ± {dice['sd']:.4f}" if dice["sd"] is not None else ""
            false = row["false_positive_runs"][label]
            voxels = statistics.fmean(row["false_voxels"][label])
            lines.append(f"{side:<10}{row['n']:>3}  {label:<6}{dice['mean']:.4f}{sd:<12}"
                         f"{false}/{row['n']}, {voxels:.1f}")  # fmt: skip
    for label, p in table.get("fisher_p", {}).items():
        lines.append(
            f"class {label}: false-positive runs, Fisher's exact test p = {p:.4f}; "
            f"false voxels, Mann-Whitney U p = {table['mann_whitney_p'][label]:.4f}"
        )
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--side", choices=SIDES)
    parser.add_argument("--work", type=Path, help="cascade_quality.py's --work")
    parser.add_argument("--peer", type=Path, help="upstream's venv (for --side upstream)")
    parser.add_argument("--stage", default="3d_lowres")
    parser.add_argument("--fold", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--start", type=int, default=0, help="first repeat number")
    parser.add_argument("--seed-base", type=int, default=SEED_BASE,
                        help="our repeat k trains with seed SEED_BASE + k (another base: another "
                        "set of draws; give it its own --out)")  # fmt: skip
    add_schedule_arguments(parser)
    parser.add_argument("--our-augmentation", action="store_true",
                        help="upstream's trainer with our training transforms (give it its own "
                        "--out; --report --ours-from names our runs' folder)")  # fmt: skip
    parser.add_argument(
        "--our-loader",
        action="store_true",
        help="upstream's trainer with our loaders and transforms (as above)",
    )
    parser.add_argument("--our-init", action="store_true",
                        help="upstream's trainer starts from the initial weights of our repeat "
                        "k's seed; with --our-loader also our repeat k's batches")  # fmt: skip
    parser.add_argument("--out", type=Path, required=True, help="folder of <side>.json")
    parser.add_argument("--report", action="store_true", help="only print both sides' table")
    parser.add_argument("--ours-from", type=Path,
                        help="--report: our repeats from this folder instead of --out")  # fmt: skip
    args = parser.parse_args()
    if not args.report and not (args.side and args.work):
        parser.error("--side and --work are needed unless --report")
    if args.side == "upstream" and not args.peer:
        parser.error("--side upstream needs --peer")
    if (args.our_augmentation or args.our_loader) and args.side != "upstream":
        parser.error("--our-augmentation and --our-loader swap upstream's parts: --side upstream")
    if args.our_init and args.side != "upstream":
        parser.error("--our-init gives upstream's trainer our initial weights: --side upstream")
    if args.our_augmentation and args.our_loader:
        parser.error("--our-loader already includes our transforms: give one of the two")
    return args


def run_side(args: argparse.Namespace) -> None:
    """``args.side``'s repeats not yet in its file, each saved as soon as it ends."""
    args.work = args.work.resolve()
    args.peer = args.peer.expanduser().resolve() if args.peer else None
    args.code, args.commit = snapshot_code(args.work)
    preprocessed = args.work / args.side / "preprocessed" / f"Dataset{NUMBER}_CascadeQuality"
    if not preprocessed.is_dir():
        sys.exit(
            f"{args.work}: no preprocessed data (run benchmarks/quality/cascade_quality.py first)"
        )
    kind = TRAINER_KINDS[swap(args)]
    name = f"nnUNetTrainer_{kind}" + "{epochs}x{iterations}v{val_iterations}".format(
        **schedule(args)
    )
    if args.side == "upstream":
        source = trainer_source(name, **schedule(args), writer="benchmarks/quality/fold_repeats.py",
                                our_augmentation=args.our_augmentation,
                                our_loader=args.our_loader, our_init=args.our_init)  # fmt: skip
        install_trainer_source(args.peer, name, source)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{args.side}_from{args.start}" if args.start else args.side
    path = args.out / f"{stem}.json"
    data = json.loads(path.read_text()) if path.is_file() else {"repeats": []}
    key = {"stage": args.stage, "fold": args.fold, "schedule": schedule(args)}
    if args.seed_base != SEED_BASE:
        key["seed_base"] = args.seed_base
    if swap(args):
        key["trainer"] = name
    if data.get("key", key) != key:
        sys.exit(f"{path} holds {data['key']}, not {key}: use another --out")
    data.update(key=key, code=args.commit if args.side == "ours" else "nnunetv2 2.8.1")
    done = {r["repeat"] for r in data["repeats"]}
    wanted = range(args.start, args.start + args.repeats)
    for repeat in (r for r in wanted if r not in done):
        record = one_repeat(args, repeat, name)
        data["repeats"].append(record)
        # a run stopped mid-write keeps the last whole record
        write_text(path, json.dumps(data, indent=1) + "\n")
        print(f"{args.side} repeat {repeat}: Dice {record['dice']}, false labels "
              f"{false_labels(record['cases'])}, {record['wall_s']} s", flush=True)  # fmt: skip


def main() -> None:
    args = parse_args()
    if not args.report:
        run_side(args)
    table = report(args.out, args.ours_from)
    if not table:
        sys.exit(f"{args.out}: no repeats recorded (ours.json, upstream.json)")
    print(format_report(table))
    if args.report:
        (args.out / "report.json").write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main()
