"""Extract the dataset fingerprint: spacings, shapes after cropping, foreground intensities.

Always recomputed and overwritten (the workflow reruns this step only when its inputs change);
``--clean`` is accepted for upstream users and changes nothing.
"""

from __future__ import annotations

import argparse
import time

from nnunet_core.commands.common import (
    add_dataset_flag,
    add_processes_flag,
    add_root_flags,
    dataset_from_args,
)
from nnunet_core.io.atomic import write_json
from nnunet_core.paths import FINGERPRINT_JSON, preprocessed_dataset_dir, raw_dataset_dir
from nnunet_core.planning.fingerprint import extract_fingerprint


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    add_root_flags(parser)
    add_processes_flag(parser)
    parser.add_argument(
        "--clean",
        action="store_true",
        help="accepted for upstream compatibility (always recomputed)",
    )


def run(args: argparse.Namespace) -> int:
    roots, name = dataset_from_args(args)
    start = time.perf_counter()
    fingerprint = extract_fingerprint(raw_dataset_dir(roots, name), args.num_processes)
    target = preprocessed_dataset_dir(roots, name) / FINGERPRINT_JSON
    write_json(target, fingerprint)
    n_cases = len(fingerprint["spacings"])
    relative = fingerprint["median_relative_size_after_cropping"]
    print(
        f"{target}: {n_cases} cases, median size after cropping {relative:.3f} of the original "
        f"({time.perf_counter() - start:.1f} s)"
    )
    return 0
