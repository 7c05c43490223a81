"""Ensemble prediction folders: average their ``.npz`` probabilities per case, then argmax.

Every input folder must hold the same cases (``nnunet-core predict --save_probabilities``).
The output gets the segmentations, ``dataset.json`` and, with ``--save_npz``, the averaged
probabilities.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_processes_flag


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", nargs="+", required=True, help="prediction folders")
    parser.add_argument("-o", "--output", required=True, help="output folder")
    add_processes_flag(parser)
    parser.add_argument(
        "--save_npz", action="store_true", help="also write the averaged probabilities"
    )
    parser.add_argument(
        "-dataset_json", "--dataset-json", help="dataset.json (default: the first input's)"
    )


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.ensemble import ensemble_folders

    cases = ensemble_folders(
        args.input, args.output, args.num_processes, args.save_npz, args.dataset_json
    )
    print(f"{args.output}: {len(cases)} cases ensembled from {len(args.input)} folders")
    return 0
