"""Check a raw dataset's integrity before fingerprinting, planning or training touch it.

Every problem is one line naming the case (or file) and what is wrong; with several problems all
are listed, then a summary line, and the exit code is 2. Only a clean dataset gets a report
(``--output``, default ``$nnUNet_preprocessed/<dataset>/verify.json``, written atomically), so
the workflow never proceeds on a broken dataset; an older report at that path is removed before
the check starts, so a failed check never leaves one that vouches for the data. Cases without
foreground are warnings. Test cases (imagesTs, labelsTs) are checked as training cases are.

``fingerprint``, ``plan`` and ``preprocess`` call ``ensure_verified``: they trust the default
report when it is current (same version, same raw folder, training files and dataset.json
unchanged in name, size and mtime), else they run this check first (and write the report).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import (
    add_dataset_flag,
    add_processes_flag,
    add_root_flags,
    dataset_from_args,
)
from nnunet_core.dataset.verify import stale_reason
from nnunet_core.dataset.verify_record import verify_one
from nnunet_core.io.atomic import read_json
from nnunet_core.layout.preprocessed import VERIFY_JSON
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    add_root_flags(parser)
    add_processes_flag(parser)
    parser.add_argument(
        "--output", help=f"report file (default: $nnUNet_preprocessed/<dataset>/{VERIFY_JSON})"
    )


def ensure_verified(roots: Roots, name: str, num_processes: int, command: str) -> None:
    """Run ``verify_one`` unless the default ``verify.json`` is current for the raw dataset.

    The workflow's verify rule writes that report just before, so there nothing is read twice;
    run on their own, fingerprint/plan/preprocess check the data once and later steps reuse it.
    """
    raw_dir = raw_dataset_dir(roots, name)
    report_path = preprocessed_dataset_dir(roots, name) / VERIFY_JSON
    reason = "not found"
    if report_path.is_file():
        try:
            reason = stale_reason(read_json(report_path), raw_dir) or ""
        except (OSError, ValueError):
            reason = "unreadable"
    if not reason:
        return
    print(f"{report_path}: {reason}; checking {raw_dir} first (as `nnunet-core verify`)")
    verify_one(roots, name, num_processes, prefix=f"nnunet-core {command}")


def run(args: argparse.Namespace) -> int:
    roots, name = dataset_from_args(args)
    output = Path(args.output) if args.output else None
    prefix = f"nnunet-core {getattr(args, 'command', 'verify')}"
    verify_one(roots, name, args.num_processes, output, prefix)
    return 0
