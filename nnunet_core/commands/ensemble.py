"""Ensemble prediction folders: average their ``.npz`` probabilities per case, then argmax.

Every input folder must hold the same cases (``nnunet-core predict --save_probabilities``).
The output gets the segmentations, ``dataset.json`` and, with ``--save_npz``, the averaged
probabilities. It is never a raw dataset's folder, and an existing folder that no prediction
command wrote keeps its files unless ``--overwrite`` (``io.prediction_output``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import add_output_folder_flags, add_processes_flag
from nnunet_core.io.prediction_output import (
    check_output_folder,
    mark_prediction_folder,
)
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import PLANS_JSON


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", nargs="+", required=True, help="prediction folders")
    add_output_folder_flags(parser, "output folder", "-o", "--output")
    add_processes_flag(parser)
    parser.add_argument(
        "--save_npz", action="store_true", help="also write the averaged probabilities"
    )
    parser.add_argument(
        "-dataset_json", "--dataset-json", help="dataset.json (default: the first input's)"
    )


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.ensemble import ensemble_folders

    # the cases it writes are those with probabilities in the inputs: checked before writing
    cases = {
        path.name.removesuffix(".npz")
        for folder in map(Path, args.input)
        if folder.is_dir()
        for path in folder.glob("*.npz")
    }
    check_output_folder(args.output, cases, (DATASET_JSON, PLANS_JSON), args.overwrite)
    cases = ensemble_folders(
        args.input, args.output, args.num_processes, args.save_npz, args.dataset_json
    )
    mark_prediction_folder(args.output, "ensemble")
    print(f"{args.output}: {len(cases)} cases ensembled from {len(args.input)} folders")
    return 0
