"""Evaluate a folder of predictions against references and write upstream's ``summary.json``.

``-djfile`` defaults to the prediction folder's ``dataset.json``, else the one above the
reference folder (``labelsTs`` sits in the raw dataset). Upstream's ``-pfile`` (plans.json) is
accepted and checked to exist; it is not needed: the file ending in dataset.json picks the reader.
``--surface-metrics`` adds HD95 and NSD per label (mm; ``nnunet_core.evaluation.surface`` says how
empty masks count), with ``--nsd-tolerance`` (1 mm, or per label ``LABEL=MM``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import add_processes_flag, add_surface_flags, surface_settings
from nnunet_core.errors import DatasetError
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import SUMMARY_JSON


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("gt_folder", help="reference segmentations")
    parser.add_argument("pred_folder", help="predicted segmentations")
    parser.add_argument("-djfile", "--dataset-json", dest="djfile", help="dataset.json")
    parser.add_argument(
        "-pfile", "--plans-json", dest="pfile", help="plans.json (upstream's; not needed)"
    )
    parser.add_argument("-o", "--output", help="summary file (default: PRED_FOLDER/summary.json)")
    add_processes_flag(parser)
    parser.add_argument("--chill", action="store_true", help="evaluate only the predicted cases")
    add_surface_flags(parser)


def _dataset_json_file(args: argparse.Namespace) -> Path:
    if args.djfile:
        return Path(args.djfile)
    for candidate in (
        Path(args.pred_folder) / DATASET_JSON,
        Path(args.gt_folder).parent / DATASET_JSON,
    ):
        if candidate.is_file():
            return candidate
    msg = f"no dataset.json in {args.pred_folder} or above {args.gt_folder}; pass -djfile"
    raise DatasetError(msg)


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.metrics import classes_from_dataset_json, compute_metrics_on_folder
    from nnunet_core.io.dataset_json import load_dataset_json

    if args.pfile and not Path(args.pfile).is_file():
        msg = f"-pfile {args.pfile}: file not found"
        raise DatasetError(msg)
    surface = surface_settings(args)
    dataset_json = load_dataset_json(_dataset_json_file(args))
    output = Path(args.output) if args.output else Path(args.pred_folder) / SUMMARY_JSON
    summary = compute_metrics_on_folder(
        args.gt_folder,
        args.pred_folder,
        dataset_json.file_ending,
        dataset_json.label_spec,
        num_processes=args.num_processes,
        output_file=output,
        chill=args.chill,
        classes=classes_from_dataset_json(dataset_json),
        surface=surface,
    )
    dice = summary["foreground_mean"]["Dice"]
    line = f"{output}: {len(summary['metric_per_case'])} cases, foreground-mean Dice {dice:.4f}"
    if surface is not None:
        means = summary["foreground_mean"]
        line += f", HD95 {means['HD95']:.2f} mm, NSD {means['NSD']:.4f}"
    print(line)
    return 0
