"""Convert a Medical Segmentation Decathlon task: ``nnunet-core convert-msd -i Task05_Prostate
[-overwrite_id N] [-np N]``.

Upstream's ``nnUNetv2_convert_MSD_dataset``: writes ``<raw>/DatasetXXX_Name`` (XXX the task's
number, or ``-overwrite_id``) with each 4-D image split into ``_000c`` channel files, labels
copied and MSD's ``dataset.json`` translated; the same file names, ``dataset.json`` and voxels
as upstream (see ``nnunet_core.dataset.msd_conversion``). A dataset of the target id in the raw,
preprocessed or results root is refused, as upstream refuses it, except an unfinished conversion
of this task (no ``dataset.json`` yet), which is completed.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import (
    add_processes_flag,
    add_progress_flags,
    add_root_flags,
    roots_from_args,
)
from nnunet_core.dataset.msd_conversion import convert_msd_task, read_msd_task


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i",
        "--input",
        dest="input",
        required=True,
        help="the extracted MSD task folder, e.g. /data/Task05_Prostate (not an nnU-Net v1 one)",
    )
    parser.add_argument(
        "-overwrite_id",
        "--overwrite-id",
        dest="overwrite_id",
        type=int,
        default=None,
        help="the dataset id to write (default: the task's number)",
    )
    add_processes_flag(parser)
    add_progress_flags(parser)
    add_root_flags(parser)


def run(args: argparse.Namespace) -> int:
    roots = roots_from_args(args)
    task = read_msd_task(args.input)
    raw = roots.require_raw()
    written = convert_msd_task(
        task,
        raw,
        [roots.preprocessed, roots.results],
        target_id=args.overwrite_id,
        num_processes=args.num_processes,
        disable_progress=True if args.no_pbar else None,
    )
    print(f"wrote {written}")
    return 0
