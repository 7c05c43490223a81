"""Extract the dataset fingerprint: spacings, shapes after cropping, foreground intensities.

Also ``extract-fingerprint`` (upstream's ``nnUNetv2_extract_fingerprint``); ``-d`` takes several
datasets. Always recomputed and overwritten (the workflow reruns this step only when its inputs
change), so ``--clean`` is accepted for upstream users and changes nothing.
``--verify_dataset_integrity`` runs ``verify`` first; without it, ``verify`` runs first only when
``verify.json`` is missing or out of date (a truncated image, NaN voxels or a 2-D case among 3-D
ones are refused either way, exit 2, nothing written).
"""

from __future__ import annotations

import argparse
import time

from nnunet_core.commands.common import (
    add_datasets_flag,
    add_progress_flags,
    add_root_flags,
    datasets_from_args,
    default_num_processes,
    positive_int,
    require_default_class,
)
from nnunet_core.commands.verify import ensure_verified, verify_one
from nnunet_core.io.atomic import write_json
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir
from nnunet_core.planning.fingerprint import extract_fingerprint

FINGERPRINT_EXTRACTOR = "DatasetFingerprintExtractor"


def add_fingerprint_flags(parser: argparse.ArgumentParser, *process_flags: str) -> None:
    """Flags shared with ``plan-and-preprocess`` (which names the process count ``-npfp``)."""
    parser.add_argument(
        *process_flags,
        dest="fingerprint_processes",
        type=positive_int,
        default=default_num_processes(),
        help="worker processes (default: $nnUNet_def_n_proc or the CPU count, max 8)",
    )
    parser.add_argument(
        "--verify-dataset-integrity",
        "--verify_dataset_integrity",
        action="store_true",
        help="run `verify` first (writes verify.json; exit 2 on a broken dataset); without it, "
        "verify runs only when verify.json is missing or out of date",
    )
    parser.add_argument(
        "--clean",
        action="store_true",
        help="accepted for upstream compatibility (the fingerprint is always recomputed)",
    )
    parser.add_argument(
        "-fpe",
        default=FINGERPRINT_EXTRACTOR,
        metavar="CLASS",
        help=f"fingerprint extractor class; only {FINGERPRINT_EXTRACTOR} exists here",
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_datasets_flag(parser)
    add_root_flags(parser)
    add_fingerprint_flags(parser, "-np", "--num-processes", "-npfp")
    add_progress_flags(parser)


def fingerprint_one(
    roots: Roots, name: str, num_processes: int, verify: bool = False, command: str = "fingerprint"
) -> None:
    """Verify (always with ``verify``, else unless verify.json is current), then extract and
    write one dataset's fingerprint."""
    if verify:
        verify_one(roots, name, num_processes, prefix=f"nnunet-core {command}")
    else:
        ensure_verified(roots, name, num_processes, command)
    start = time.perf_counter()
    fingerprint = extract_fingerprint(raw_dataset_dir(roots, name), num_processes)
    target = preprocessed_dataset_dir(roots, name) / FINGERPRINT_JSON
    write_json(target, fingerprint)
    n_cases = len(fingerprint["spacings"])
    relative = fingerprint["median_relative_size_after_cropping"]
    print(
        f"{target}: {n_cases} cases, median size after cropping {relative:.3f} of the original "
        f"({time.perf_counter() - start:.1f} s)"
    )


def run(args: argparse.Namespace) -> int:
    require_default_class("-fpe", args.fpe, FINGERPRINT_EXTRACTOR)
    roots, names = datasets_from_args(args)
    for name in names:
        fingerprint_one(
            roots,
            name,
            args.fingerprint_processes,
            args.verify_dataset_integrity,
            getattr(args, "command", "fingerprint"),
        )
    return 0
