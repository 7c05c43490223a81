"""Evaluate predictions against references for given labels, without a dataset.json.

Upstream's ``nnUNetv2_evaluate_simple``: ``-l`` lists the labels to evaluate (label 0, if listed,
is reported but left out of ``foreground_mean``), ``-il`` is the ignore label. The file ending
is the first reference file's (``.nii.gz`` counts as one ending, where upstream would take
``.gz``). Writes ``summary.json`` as ``evaluate`` does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import add_processes_flag
from nnunet_core.errors import DatasetError
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.layout.results import SUMMARY_JSON

DOUBLE_ENDINGS = (".nii.gz",)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gt_folder", help="reference segmentations")
    parser.add_argument("pred_folder", help="predicted segmentations")
    parser.add_argument(
        "-l", "--labels", type=int, nargs="+", required=True, help="labels to evaluate"
    )
    parser.add_argument("-il", "--ignore-label", dest="il", type=int, help="ignore label")
    parser.add_argument("-o", "--output", help="summary file (default: PRED_FOLDER/summary.json)")
    add_processes_flag(parser)
    parser.add_argument("--chill", action="store_true", help="evaluate only the predicted cases")


def file_ending(folder: Path) -> str:
    """The ending of the first (sorted) file in ``folder``."""
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        msg = f"{folder}: no reference files"
        raise DatasetError(msg)
    name = files[0]
    double = next((e for e in DOUBLE_ENDINGS if name.endswith(e)), None)
    return double or Path(name).suffix


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.metrics import compute_metrics_on_folder

    gt = Path(args.gt_folder)
    if not gt.is_dir():
        msg = f"{gt}: reference folder not found"
        raise DatasetError(msg)
    labels = list(dict.fromkeys(args.labels))
    spec = LabelSpec(
        labels={str(label): (label,) for label in labels},
        ignore_label=args.il,
        all_labels=tuple(labels),
    )
    output = Path(args.output) if args.output else Path(args.pred_folder) / SUMMARY_JSON
    summary = compute_metrics_on_folder(
        gt,
        args.pred_folder,
        file_ending(gt),
        spec,
        num_processes=args.num_processes,
        output_file=output,
        chill=args.chill,
        classes=labels,
    )
    dice = summary["foreground_mean"]["Dice"]
    print(f"{output}: {len(summary['metric_per_case'])} cases, foreground-mean Dice {dice:.4f}")
    return 0
