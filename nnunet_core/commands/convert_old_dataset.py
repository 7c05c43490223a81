"""Convert an nnU-Net v1 raw task: ``nnunet-core convert-old-dataset /data/Task004_Hippocampus
Dataset004_Hippocampus``.

Upstream's ``nnUNetv2_convert_old_nnUNet_dataset``: writes ``<raw>/<output_dataset_name>`` with
v1's image and label folders copied and its ``dataset.json`` translated; the same files and
``dataset.json`` as upstream (see ``nnunet_core.dataset.old_conversion``). A raw dataset of the
same id is refused, except an unfinished conversion of this name (no ``dataset.json`` yet), which
is completed.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_root_flags, roots_from_args
from nnunet_core.dataset.old_conversion import convert_old_task, read_old_task


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input_folder",
        help="the nnU-Net v1 raw task folder: its path, e.g. /data/Task004_Hippocampus",
    )
    parser.add_argument(
        "output_dataset_name",
        help="the new dataset's name (not a path), DatasetXXX_Name, written into the raw root",
    )
    add_root_flags(parser)


def run(args: argparse.Namespace) -> int:
    roots = roots_from_args(args)
    task = read_old_task(args.input_folder)
    written = convert_old_task(task, roots.require_raw(), args.output_dataset_name)
    print(f"wrote {written}")
    return 0
