#!/usr/bin/env python
"""What a cascade stage trains on: per-sample statistics of training batches, ours and upstream's.

    python -m benchmarks.parity.cascade_batches --work /tmp/cascade_quality --run 0 \
        --peer ~/.cache/nnunet-peer/venv --iterations 200 --out cascade_batches.json

Issue 12 measured our cascade's Dice a little below upstream's at the same schedule. Both sides'
cascade folds read the 3d_lowres predictions, so a gap can come from the inputs (the lowres
predictions) or from what training makes of them (the loader and the augmentation of the one-hot
channels). This separates the second: it builds the 3d_cascade_fullres training loader of every
fold on each side (ours: ``Trainer._loaders``; upstream: ``nnUNetTrainer.get_dataloaders``, single
threaded), both reading the same previous-stage files (``--run``'s 3d_lowres
``predicted_next_stage`` from ``benchmarks/quality/cascade_quality.py``'s ``--work``), and draws
``--iterations`` batches per fold. Per sample, after the whole training pipeline: the image
channels' mean and sd, each foreground label's share of the target and of its one-hot input
channel, and the Dice between the two (how much the augmentation damaged the previous stage, and
how far that stage was from the truth). The draws differ between the sides (upstream's seeds come
from the OS), so the comparison is of distributions: means and a two-sample Kolmogorov-Smirnov
p-value per statistic. Samples of one batch are not independent, so read small p-values with care.

``--configuration 3d_lowres`` (with ``--folds``) compares the first stage's loaders the same way
(image statistics, each label's share and presence per sample; no previous stage). Issue 12:
our 3d_lowres fold 3 put false lesion voxels on its lesion-free validation case more often than
upstream's (``benchmarks/quality/fold_repeats.py``), so its loader was compared too.

``--dataset`` with ``--configuration 3d_fullres`` (or ``2d``) does the same for another set
laid out like ``benchmarks/quality/quality.py``'s ``--work`` (``raw/``, ``ours/preprocessed/``,
``upstream/preprocessed/``). Issue 16: on quality.py's 3-D set our trainer learned the lesion
later than upstream's in more runs; upstream's trainer on our draws fails the same way, so the
distribution of the draws is what is left to compare.

A second table (``--repeats``, 0 to skip) takes the loader out: six crops of our first fold's loader
(before augmentation: image, target and previous stage) go through each side's whole training
pipeline ``--repeats`` times each (upstream's ``get_training_transforms`` with the trainer's own
arguments, ours the trainer's transform), so any difference left is the augmentation's.
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
# The cascade stage (default), its source, and the plain stages of another --dataset.
CONFIGURATIONS = ("3d_cascade_fullres", "3d_lowres", "3d_fullres", "2d")
LOWRES = "nnUNetTrainer__nnUNetPlans__3d_lowres"
FOLDS = range(5)

# Shared by both sides (the peer runs it from this text): one row of statistics per sample.
SAMPLE_STATS = textwrap.dedent(
    """
    import numpy as np

    def first(target):
        \"\"\"The full-resolution target of a deep-supervision list.\"\"\"
        return target[0] if isinstance(target, list) else target

    def centre_offset(mask):
        \"\"\"The label centroid's distance from the patch centre, voxels (None: absent).\"\"\"
        if not mask.any():
            return None
        centre = (np.asarray(mask.shape) - 1) / 2
        return float(np.linalg.norm(np.argwhere(mask).mean(axis=0) - centre))

    def border_share(mask, width=2):
        \"\"\"The share of the label's voxels within ``width`` voxels of the patch border.\"\"\"
        if not mask.any():
            return None
        inner = mask[tuple(slice(width, n - width) for n in mask.shape)]
        return float(1 - inner.sum() / mask.sum())

    def sample_rows(data, target, labels, cascaded=True):
        \"\"\"Per sample: image statistics, each label's share and presence in the target and,
        for a cascade stage (one-hot channels after the images), the one-hot's share and Dice.\"\"\"
        rows = []
        images = data.shape[1] - len(labels) if cascaded else data.shape[1]
        for j in range(data.shape[0]):
            row = {"image_mean": float(data[j, :images].mean()),
                   "image_sd": float(data[j, :images].std())}
            for k, label in enumerate(labels):
                truth = target[j, 0] == label
                row[f"target_{label}"] = float(truth.mean())
                row[f"present_{label}"] = float(truth.any())
                row[f"offset_{label}"] = centre_offset(truth)
                row[f"border_{label}"] = border_share(truth)
                if not cascaded:
                    continue
                one_hot = data[j, images + k] > 0.5
                row[f"input_{label}"] = float(one_hot.mean())
                total = int(one_hot.sum() + truth.sum())
                overlap = 2 * int((one_hot & truth).sum())
                row[f"dice_{label}"] = overlap / total if total else None
            rows.append(row)
        return rows

    def batch_rows(batch, labels, cascaded):
        \"\"\"A loader batch's rows, each with the case it was cropped from.\"\"\"
        rows = sample_rows(np.asarray(batch["data"]), np.asarray(first(batch["target"])), labels,
                           cascaded)
        return [dict(row, case=str(key)) for row, key in zip(rows, batch["keys"])]
    """
)

PEER_SIDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np, torch
    from batchgenerators.utilities.file_and_folder_operations import load_json
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer

    preprocessed, configuration, mode, count = sys.argv[1:5]
    labels, folds = json.loads(sys.argv[5]), json.loads(sys.argv[6])
    cascaded = configuration == "3d_cascade_fullres"
    torch.set_num_threads(1)

    def trainer(fold):
        plans = load_json(preprocessed + "/nnUNetPlans.json")
        plans["continue_training"] = False  # the peer's trainer pops this key
        return nnUNetTrainer(plans, configuration, fold,
                             load_json(preprocessed + "/dataset.json"), torch.device("cpu"))

    rows = []
    if mode == "loader":
        for fold in folds:
            t = trainer(fold)
            t._set_batch_size_and_oversample()
            train_batches, _ = t.get_dataloaders()
            for _ in range(int(count)):
                rows += batch_rows(next(train_batches), labels, cascaded)
    else:
        t = trainer(folds[0])
        rotation, dummy_2d, _, mirror_axes = (
            t.configure_rotation_dummyDA_mirroring_and_inital_patch_size())
        pipeline = t.get_training_transforms(
            t.configuration_manager.patch_size, rotation, None, mirror_axes, dummy_2d,
            use_mask_for_norm=t.configuration_manager.use_mask_for_norm, is_cascaded=cascaded,
            foreground_labels=t.label_manager.foreground_labels, regions=None, ignore_label=None)
        crops = np.load(mode)
        for i in range(len(crops.files) // 2):
            for _ in range(int(count)):
                out = pipeline(image=torch.from_numpy(crops[f"data{i}"].copy()),
                               segmentation=torch.from_numpy(crops[f"seg{i}"].copy()))
                rows += sample_rows(out["image"].numpy()[None],
                                    first(out["segmentation"]).numpy()[None], labels, cascaded)
    print("ROWS " + json.dumps(rows))
    """
)

namespace: dict[str, Any] = {}
exec(SAMPLE_STATS, namespace)  # noqa: S102 - our own text, shared verbatim with the peer
sample_rows, batch_rows = namespace["sample_rows"], namespace["batch_rows"]


def shared_results(work: Path, dataset: str, run: int, scratch: Path, cascaded: bool) -> Path:
    """A results root whose 3d_lowres folder holds ``run``'s next-stage files (ours, by default
    our run's; both sides read this same copy). A 3d_lowres loader reads none: an empty root."""
    if not cascaded:
        (scratch / "results").mkdir(parents=True, exist_ok=True)
        return scratch / "results"
    source = work / "ours" / f"run{run}" / "results" / dataset / LOWRES / "predicted_next_stage"
    if not source.is_dir():
        sys.exit(
            f"{source}: missing (run benchmarks/quality/cascade_quality.py --work {work} first)"
        )
    target = scratch / "results" / dataset / LOWRES / "predicted_next_stage"
    if not target.is_dir():
        shutil.copytree(source, target)
    return scratch / "results"


def our_loaders(work: Path, results: Path, scratch: Path, seed: int, run: tuple[str, str, list]):
    """Each training loader of ``run`` = (dataset, configuration, folds), our trainer's with its
    transform, and the label list."""
    import torch

    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.layout.roots import Roots
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots.from_env(work / "raw", work / "ours" / "preprocessed", results)
    dataset, config, folds = run
    for fold in folds:
        setup = prepare_fold(roots, dataset, config, fold, "nnUNetPlans", "nnUNetTrainer")
        setup = dataclasses.replace(setup, output_folder=scratch / "ours_fold")
        settings = TrainerSettings(num_workers=0, seed=seed + fold)
        loader, _ = Trainer(setup, settings, torch.device("cpu"))._loaders()
        yield loader, list(setup.label_spec.foreground_labels)


def our_batch_rows(loaders, iterations: int, cascaded: bool) -> list[dict]:
    """``iterations`` batches of each fold's loader."""
    rows: list[dict] = []
    for loader, labels in loaders:
        for index in range(iterations):
            rows += batch_rows(loader(index // 10, index % 10), labels, cascaded)
        print(f"  ours: {len(rows)} samples", flush=True)
    return rows


def our_pipeline_rows(
    loader, labels: list[int], crops: Path, repeats: int, seed: int, cascaded: bool
) -> list[dict]:
    """Six un-augmented crops of ``loader`` saved to ``crops``; our transform ``repeats`` times
    on each (the rng differs per repeat)."""
    saved = {}
    for i in range(6):
        _, data, seg, _ = loader.crop_sample(0, i, i % 2)  # batch of 2: 1 forces foreground
        saved[f"data{i}"], saved[f"seg{i}"] = np.asarray(data), np.asarray(seg)
    np.savez(crops, **saved)
    rows: list[dict] = []
    for i in range(6):
        for repeat in range(repeats):
            rng = np.random.default_rng([seed, i, repeat])
            data, seg = loader.transform(saved[f"data{i}"].copy(), saved[f"seg{i}"].copy(), rng)
            rows += sample_rows(np.asarray(data)[None], np.asarray(seg)[None], labels, cascaded)
    return rows


def peer_rows(
    peer: Path,
    work: Path,
    results: Path,
    run: tuple[str, str, list[int]],
    mode: str,
    count: int,
    labels: list[int],
) -> list[dict]:
    """Upstream's rows, by the peer venv's python, for ``run`` = (dataset, configuration, folds):
    ``mode`` "loader" (``count`` batches per fold) or a crops file (each crop through the
    training pipeline ``count`` times)."""
    env = dict(os.environ, nnUNet_raw=str(work / "raw"), nnUNet_results=str(results))
    env.update(nnUNet_preprocessed=str(work / "upstream" / "preprocessed"), nnUNet_n_proc_DA="0")
    env.pop("PYTHONPATH", None)
    command = [str(peer / "bin" / "python"), "-c", SAMPLE_STATS + PEER_SIDE,
               str(work / "upstream" / "preprocessed" / run[0]), run[1], mode, str(count),
               json.dumps(labels), json.dumps(run[2])]  # fmt: skip
    return peer_script_rows(command, env, f"upstream's {mode}")


def peer_script_rows(command: list[str], env: dict[str, str], what: str) -> list[dict]:
    """The rows a script run by the peer venv's python printed on its last ``ROWS`` line;
    exits naming ``what`` with the script's error where it failed."""
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][5:])


def compare(ours: list[dict], upstream: list[dict]) -> list[dict[str, Any]]:
    """Per statistic: both means, the difference and the KS p-value (None values dropped)."""
    table = []
    for key in (k for k in upstream[0] if k != "case"):
        a = np.array([r[key] for r in ours if r[key] is not None], dtype=float)
        b = np.array([r[key] for r in upstream if r[key] is not None], dtype=float)
        table.append({"statistic": key, "ours": float(a.mean()), "upstream": float(b.mean()),
                      "difference": float(a.mean() - b.mean()), "n": [len(a), len(b)],
                      "ks_p": float(stats.ks_2samp(a, b).pvalue)})  # fmt: skip
    return table


def case_frequencies(ours: list[dict], upstream: list[dict]) -> dict[str, Any]:
    """How often each case was drawn per side, and the chi-square test of equal shares."""
    cases = sorted({r["case"] for r in ours} | {r["case"] for r in upstream})
    counts = [[sum(r["case"] == c for r in side) for c in cases] for side in (ours, upstream)]
    return {"cases": cases, "ours": counts[0], "upstream": counts[1],
            "chi2_p": float(stats.chi2_contingency(counts).pvalue)}  # fmt: skip


def format_table(table: list[dict[str, Any]]) -> str:
    lines = [f"{'statistic':12s} {'ours':>8s} {'upstream':>8s} {'diff':>8s} {'KS p':>7s}   n"]
    for row in table:
        lines.append(f"{row['statistic']:12s} {row['ours']:8.4f} {row['upstream']:8.4f} "
                     f"{row['difference']:+8.4f} {row['ks_p']:7.3f}   {row['n']}")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="cascade_quality.py's or quality.py's --work")  # fmt: skip
    parser.add_argument("--dataset", default=DATASET,
                        help="folder name, e.g. Dataset952_QualitySynth3d")  # fmt: skip
    parser.add_argument("--run", type=int, default=0, help="whose 3d_lowres files both read")
    parser.add_argument("--peer", type=Path, required=True, help="upstream's venv")
    parser.add_argument("--iterations", type=int, default=200, help="batches per fold and side")
    parser.add_argument("--repeats", type=int, default=500, help="pipeline runs per crop")
    parser.add_argument("--seed", type=int, default=0, help="ours: fold f uses seed + f")
    parser.add_argument("--configuration", choices=CONFIGURATIONS, default=CONFIGURATIONS[0],
                        help="the stage whose loader is compared")  # fmt: skip
    parser.add_argument("--folds", type=int, nargs="+", default=list(FOLDS))
    parser.add_argument("--out", type=Path, default=Path("cascade_batches.json"))
    args = parser.parse_args()
    cascaded = args.configuration == CONFIGURATIONS[0]
    scratch = args.work / "cascade_batches"
    results = shared_results(args.work, args.dataset, args.run, scratch, cascaded)
    run = (args.dataset, args.configuration, args.folds)
    loaders = list(our_loaders(args.work, results, scratch, args.seed, run))
    labels = loaders[0][1]
    tables = {}
    if args.iterations:
        ours = our_batch_rows(loaders, args.iterations, cascaded)
        upstream = peer_rows(args.peer, args.work, results, run, "loader", args.iterations, labels)
        tables["batches"] = compare(ours, upstream)
        tables["cases"] = case_frequencies(ours, upstream)
        print(f"whole batches ({args.iterations} per fold and side):")
        print(format_table(tables["batches"]))
        cases = tables["cases"]
        print(f"samples per case, ours / upstream (chi-square p {cases['chi2_p']:.3f}):")
        drawn = zip(cases["cases"], cases["ours"], cases["upstream"], strict=True)
        print(", ".join(f"{case} {a}/{b}" for case, a, b in drawn))
    if args.repeats:
        crops = scratch / "crops.npz"
        ours = our_pipeline_rows(*loaders[0], crops, args.repeats, args.seed, cascaded)
        upstream = peer_rows(args.peer, args.work, results, run, str(crops), args.repeats, labels)
        tables["pipeline"] = compare(ours, upstream)
        print(f"the training pipeline on the same six crops ({args.repeats} times each):")
        print(format_table(tables["pipeline"]))
    args.out.write_text(json.dumps({"command": sys.argv, **tables}, indent=1) + "\n")


if __name__ == "__main__":
    main()
