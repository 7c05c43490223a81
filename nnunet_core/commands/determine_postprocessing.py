"""Decide postprocessing for a folder of predictions against references (upstream's
``nnUNetv2_determine_postprocessing``).

Keeps the largest connected component (all foreground, then per label or region) wherever that
raises the Dice, and writes ``postprocessing.json`` into ``-i`` (no ``.pkl``: we never write or
read pickles) and the postprocessed cases into ``-i/postprocessed`` (``--remove_postprocessed``
deletes them afterwards). ``find-best-config`` does the same on the winner's cross-validation.
"""

from __future__ import annotations

import argparse
from contextlib import suppress
from pathlib import Path

from nnunet_core.commands.common import add_processes_flag
from nnunet_core.errors import DatasetError
from nnunet_core.io.removal import remove_tree
from nnunet_core.layout.raw import DATASET_JSON


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", required=True, help="folder of predicted segmentations")
    parser.add_argument("-ref", "--reference", dest="ref", required=True, help="reference folder")
    parser.add_argument(
        "-dataset_json", "--dataset-json", help="dataset.json (default: the input folder's)"
    )
    parser.add_argument("-plans_json", help="upstream's plans file; checked to exist, not needed")
    add_processes_flag(parser)
    parser.add_argument(
        "--remove_postprocessed", action="store_true", help="delete -i/postprocessed afterwards"
    )


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.postprocessing import determine_postprocessing
    from nnunet_core.io.dataset_json import load_dataset_json
    from nnunet_core.layout.results import POSTPROCESSING_JSON

    if args.plans_json and not Path(args.plans_json).is_file():
        msg = f"-plans_json {args.plans_json}: file not found"
        raise DatasetError(msg)
    folder = Path(args.input)
    djfile = Path(args.dataset_json) if args.dataset_json else folder / DATASET_JSON
    if not djfile.is_file():
        msg = f"{djfile}: dataset.json not found; pass -dataset_json"
        raise DatasetError(msg)
    result = determine_postprocessing(
        folder, args.ref, load_dataset_json(djfile), args.num_processes
    )
    if args.remove_postprocessed:
        with suppress(OSError):
            remove_tree(folder / "postprocessed", inside=[folder])
    steps = len(result["postprocessing_fns"])
    print(f"{folder / POSTPROCESSING_JSON}: {steps} postprocessing step(s)")
    return 0
