"""Apply the postprocessing chosen by ``find-best-config`` to a folder of segmentations.

``-pp_pkl_file`` (upstream's flag name; ``--pp-file`` too) takes ``postprocessing.json``: plain
JSON, ours or upstream's, never a pickle. Given upstream's ``postprocessing.pkl``, the
``postprocessing.json`` that upstream writes beside it is read instead (same steps); without one
the command fails: a pickle can run code when it is opened.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from nnunet_core.commands.common import add_output_folder_flags, add_processes_flag
from nnunet_core.errors import DatasetError
from nnunet_core.io.prediction_output import (
    check_output_folder,
    mark_prediction_folder,
)
from nnunet_core.layout.raw import DATASET_JSON


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-i", "--input", required=True, help="folder of segmentations")
    add_output_folder_flags(parser, "output folder", "-o", "--output")
    parser.add_argument(
        "-pp_pkl_file", "--pp-file", dest="pp_file", required=True, help="postprocessing.json"
    )
    add_processes_flag(parser)
    parser.add_argument(
        "-dataset_json", "--dataset-json", help="dataset.json (default: the input folder's)"
    )
    parser.add_argument("-plans_json", help="upstream's plans file; checked to exist, not needed")


def json_beside_pickle(path: Path) -> Path:
    """``x.pkl`` -> the ``x.json`` next to it (upstream writes both); other paths unchanged."""
    if path.suffix != ".pkl":
        return path
    beside = path.with_suffix(".json")
    if not beside.is_file():
        msg = (
            f"-pp_pkl_file {path}: pickles are never opened (they can run code) and there is no "
            f"{beside.name} beside it"
        )
        raise DatasetError(msg)
    print(f"reading {beside} (the JSON twin of {path.name})", file=sys.stderr)
    return beside


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.postprocessing import (
        apply_postprocessing_to_folder,
        load_postprocessing,
    )
    from nnunet_core.io.dataset_json import load_dataset_json

    if args.plans_json and not Path(args.plans_json).is_file():
        msg = f"-plans_json {args.plans_json}: file not found"
        raise DatasetError(msg)
    djfile = Path(args.dataset_json) if args.dataset_json else Path(args.input) / DATASET_JSON
    dataset_json = load_dataset_json(djfile)
    steps = load_postprocessing(json_beside_pickle(Path(args.pp_file)))
    source, ending = Path(args.input), dataset_json.file_ending
    written = [p.name.removesuffix(ending) for p in source.glob(f"*{ending}")]
    check_output_folder(args.output, written, (DATASET_JSON,), args.overwrite)
    cases = apply_postprocessing_to_folder(
        args.input, args.output, steps, ending, args.num_processes
    )
    shutil.copy(djfile, Path(args.output) / DATASET_JSON)
    mark_prediction_folder(args.output, "apply-postprocessing")
    print(f"{args.output}: {len(cases)} cases, {len(steps)} postprocessing step(s)")
    return 0
