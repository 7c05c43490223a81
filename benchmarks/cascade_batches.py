#!/usr/bin/env python
"""What a cascade stage trains on: per-sample statistics of training batches, ours and upstream's.

    python benchmarks/cascade_batches.py --work /tmp/cascade_quality --run 0 \
        --peer ~/.cache/nnunet-peer/venv --iterations 200 --out cascade_batches.json

Issue 12 measured our cascade's Dice a little below upstream's at the same schedule. Both sides'
cascade folds read the 3d_lowres predictions, so a gap can come from the inputs (the lowres
predictions) or from what training makes of them (the loader and the augmentation of the one-hot
channels). This separates the second: it builds the 3d_cascade_fullres training loader of every
fold on each side (ours: ``Trainer._loaders``; upstream: ``nnUNetTrainer.get_dataloaders``, single
threaded), both reading the same previous-stage files (``--run``'s 3d_lowres
``predicted_next_stage`` from ``benchmarks/cascade_quality.py``'s ``--work``), and draws
``--iterations`` batches per fold. Per sample, after the whole training pipeline: the image
channels' mean and sd, each foreground label's share of the target and of its one-hot input
channel, and the Dice between the two (how much the augmentation damaged the previous stage, and
how far that stage was from the truth). The draws differ between the sides (upstream's seeds come
from the OS), so the comparison is of distributions: means and a two-sample Kolmogorov-Smirnov
p-value per statistic. Samples of one batch are not independent, so read small p-values with care.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

DATASET = "Dataset953_CascadeQuality"
CONFIGURATION = "3d_cascade_fullres"
LOWRES = "nnUNetTrainer__nnUNetPlans__3d_lowres"
FOLDS = range(5)

# Shared by both sides (the peer runs it from this text): one row of statistics per sample.
SAMPLE_STATS = textwrap.dedent(
    """
    import numpy as np

    def sample_rows(data, target, labels):
        rows = []
        images = data.shape[1] - len(labels)
        for j in range(data.shape[0]):
            row = {"image_mean": float(data[j, :images].mean()),
                   "image_sd": float(data[j, :images].std())}
            for k, label in enumerate(labels):
                one_hot, truth = data[j, images + k] > 0.5, target[j, 0] == label
                row[f"target_{label}"] = float(truth.mean())
                row[f"input_{label}"] = float(one_hot.mean())
                total = int(one_hot.sum() + truth.sum())
                overlap = 2 * int((one_hot & truth).sum())
                row[f"dice_{label}"] = overlap / total if total else None
            rows.append(row)
        return rows
    """
)

PEER_SIDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from batchgenerators.utilities.file_and_folder_operations import load_json
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    preprocessed, iterations, labels = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    rows = []
    for fold in range(5):
        plans = load_json(preprocessed + "/nnUNetPlans.json")
        plans["continue_training"] = False  # the peer's trainer pops this key
        trainer = nnUNetTrainer(plans, "3d_cascade_fullres", fold,
                                load_json(preprocessed + "/dataset.json"), torch.device("cpu"))
        trainer._set_batch_size_and_oversample()
        train_batches, _ = trainer.get_dataloaders()
        for _ in range(iterations):
            batch = next(train_batches)
            target = batch["target"][0] if isinstance(batch["target"], list) else batch["target"]
            rows += sample_rows(np.asarray(batch["data"]), np.asarray(target), labels)
    print("ROWS " + json.dumps(rows))
    """
)

namespace: dict[str, Any] = {}
exec(SAMPLE_STATS, namespace)  # noqa: S102 - our own text, shared verbatim with the peer
sample_rows = namespace["sample_rows"]


def shared_results(work: Path, run: int, scratch: Path) -> Path:
    """A results root whose 3d_lowres folder holds ``run``'s next-stage files (ours, by default
    our run's; both sides read this same copy)."""
    source = work / "ours" / f"run{run}" / "results" / DATASET / LOWRES / "predicted_next_stage"
    if not source.is_dir():
        sys.exit(f"{source}: missing (run benchmarks/cascade_quality.py --work {work} first)")
    target = scratch / "results" / DATASET / LOWRES / "predicted_next_stage"
    if not target.is_dir():
        shutil.copytree(source, target)
    return scratch / "results"


def our_rows(work: Path, results: Path, scratch: Path, iterations: int, seed: int) -> list[dict]:
    """Our training loader of each fold, ``iterations`` batches each."""
    import torch

    from nnunet_core.paths import Roots
    from nnunet_core.training.fold_setup import prepare_fold
    from nnunet_core.training.trainer import Trainer, TrainerSettings

    roots = Roots.from_env(work / "raw", work / "ours" / "preprocessed", results)
    rows: list[dict] = []
    for fold in FOLDS:
        setup = prepare_fold(roots, DATASET, CONFIGURATION, fold, "nnUNetPlans", "nnUNetTrainer")
        setup = dataclasses.replace(setup, output_folder=scratch / "ours_fold")
        settings = TrainerSettings(num_workers=0, seed=seed + fold)
        loader, _ = Trainer(setup, settings, torch.device("cpu"))._loaders()
        labels = list(setup.label_spec.foreground_labels)
        for index in range(iterations):
            batch = loader(index // 10, index % 10)
            target = batch["target"][0] if isinstance(batch["target"], list) else batch["target"]
            rows += sample_rows(batch["data"].numpy(), target.numpy(), labels)
        print(f"  ours fold {fold}: {len(rows)} samples", flush=True)
    return rows


def peer_rows(peer: Path, work: Path, results: Path, iterations: int, labels: list[int]):
    """Upstream's training loader of each fold, run by the peer venv's python."""
    env = dict(os.environ, nnUNet_raw=str(work / "raw"), nnUNet_results=str(results))
    env.update(nnUNet_preprocessed=str(work / "upstream" / "preprocessed"), nnUNet_n_proc_DA="0")
    env.pop("PYTHONPATH", None)
    command = [str(peer / "bin" / "python"), "-c", SAMPLE_STATS + PEER_SIDE,
               str(work / "upstream" / "preprocessed" / DATASET), str(iterations),
               json.dumps(labels)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"upstream's loader failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][5:])


def compare(ours: list[dict], upstream: list[dict]) -> list[dict[str, Any]]:
    """Per statistic: both means, the difference and the KS p-value (None values dropped)."""
    table = []
    for key in upstream[0]:
        a = np.array([r[key] for r in ours if r[key] is not None], dtype=float)
        b = np.array([r[key] for r in upstream if r[key] is not None], dtype=float)
        table.append({"statistic": key, "ours": float(a.mean()), "upstream": float(b.mean()),
                      "difference": float(a.mean() - b.mean()), "n": [len(a), len(b)],
                      "ks_p": float(stats.ks_2samp(a, b).pvalue)})  # fmt: skip
    return table


def format_table(table: list[dict[str, Any]]) -> str:
    lines = [f"{'statistic':12s} {'ours':>8s} {'upstream':>8s} {'diff':>8s} {'KS p':>7s}   n"]
    for row in table:
        lines.append(f"{row['statistic']:12s} {row['ours']:8.4f} {row['upstream']:8.4f} "
                     f"{row['difference']:+8.4f} {row['ks_p']:7.3f}   {row['n']}")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="cascade_quality.py's --work")
    parser.add_argument("--run", type=int, default=0, help="whose 3d_lowres files both read")
    parser.add_argument("--peer", type=Path, required=True, help="upstream's venv")
    parser.add_argument("--iterations", type=int, default=200, help="batches per fold and side")
    parser.add_argument("--seed", type=int, default=0, help="ours: fold f uses seed + f")
    parser.add_argument("--out", type=Path, default=Path("cascade_batches.json"))
    args = parser.parse_args()
    scratch = args.work / "cascade_batches"
    results = shared_results(args.work, args.run, scratch)
    ours = our_rows(args.work, results, scratch, args.iterations, args.seed)
    labels = sorted(int(k.split("_")[1]) for k in ours[0] if k.startswith("target_"))
    upstream = peer_rows(args.peer, args.work, results, args.iterations, labels)
    table = compare(ours, upstream)
    print(format_table(table))
    args.out.write_text(json.dumps({"command": sys.argv, "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
