"""Apply the postprocessing chosen by ``find-best-config`` to a folder of segmentations.

``-pp_pkl_file`` (upstream's flag name; ``--pp-file`` too) takes ``postprocessing.json``: plain
JSON, ours or upstream's, never a pickle.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from nnunet_core.commands.common import add_processes_flag
from nnunet_core.paths import DATASET_JSON


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", required=True, help="folder of segmentations")
    parser.add_argument("-o", "--output", required=True, help="output folder")
    parser.add_argument(
        "-pp_pkl_file", "--pp-file", dest="pp_file", required=True, help="postprocessing.json"
    )
    add_processes_flag(parser)
    parser.add_argument(
        "-dataset_json", "--dataset-json", help="dataset.json (default: the input folder's)"
    )
    parser.add_argument("-plans_json", help="accepted for upstream compatibility; not needed")


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.postprocessing import (
        apply_postprocessing_to_folder,
        load_postprocessing,
    )
    from nnunet_core.io.dataset_json import load_dataset_json

    djfile = Path(args.dataset_json) if args.dataset_json else Path(args.input) / DATASET_JSON
    dataset_json = load_dataset_json(djfile)
    steps = load_postprocessing(args.pp_file)
    cases = apply_postprocessing_to_folder(
        args.input, args.output, steps, dataset_json.file_ending, args.num_processes
    )
    shutil.copy(djfile, Path(args.output) / DATASET_JSON)
    print(f"{args.output}: {len(cases)} cases, {len(steps)} postprocessing step(s)")
    return 0
