"""Preprocess the training cases: crop, normalize, resample, store as blosc2 (upstream's method).

Reads ``$preprocessed/D/<plans>.json`` and the raw cases; writes one folder per data identifier
(configurations sharing one are preprocessed once). Each folder is built aside and swapped in
when complete, and ``<data_identifier>/preprocess_summary.json`` is written last, so a crash
leaves no half-written folder and a rerun starts clean. labelsTr is copied to
``gt_segmentations/`` for evaluation.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import os
import shutil
from pathlib import Path

from nnunet_core.commands.common import (
    add_dataset_flag,
    add_processes_flag,
    add_root_flags,
    dataset_from_args,
)
from nnunet_core.dataset.discovery import RawCase, training_cases
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.paths import (
    DATASET_JSON,
    DEFAULT_PLANS_NAME,
    GT_FOLDER,
    plans_file,
    preprocessed_dataset_dir,
    raw_dataset_dir,
)
from nnunet_core.planning.plans import configuration_names, load_plans


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    add_root_flags(parser)
    parser.add_argument(
        "-c",
        "--configurations",
        nargs="+",
        metavar="CONFIG",
        help="configurations to preprocess (default: every configuration in the plans)",
    )
    parser.add_argument(
        "-p", "--plans-name", default=DEFAULT_PLANS_NAME, help="plans file name (nnUNetPlans)"
    )
    add_processes_flag(parser)
    parser.add_argument("--no-pbar", action="store_true", help="never show a progress bar")


def copy_gt_segmentations(cases: list[RawCase], target: Path, file_ending: str) -> int:
    """Copy each case's label to ``target`` atomically; identical files are left alone."""
    from nnunet_core.io.blosc2_store import FILE_MODE

    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for case in cases:
        if case.label is None or not case.label.is_file():
            msg = f"case {case.identifier}: label file {case.label} not found"
            raise DatasetError(msg)
        destination = target / f"{case.identifier}{file_ending}"
        if destination.is_file() and filecmp.cmp(case.label, destination, shallow=False):
            continue
        with atomic_path(destination, suffix=file_ending) as tmp:
            shutil.copyfile(case.label, tmp)
            os.chmod(tmp, FILE_MODE)
        copied += 1
    return copied


def _dataset_json(preprocessed_dir: Path, raw_dir: Path) -> DatasetJson:
    """The planner's copy next to the plans (as upstream), else the raw one."""
    copy = preprocessed_dir / DATASET_JSON
    return load_dataset_json(copy if copy.is_file() else raw_dir / DATASET_JSON)


def run(args: argparse.Namespace) -> int:
    # imported here: the CLI imports every command module just to build its parser
    from nnunet_core.preprocessing.preprocessor import group_by_identifier, preprocess_dataset

    roots, name = dataset_from_args(args)
    raw_dir = raw_dataset_dir(roots, name)
    preprocessed_dir = preprocessed_dataset_dir(roots, name)
    plans_path = plans_file(preprocessed_dir, args.plans_name)
    plans = load_plans(plans_path)
    dataset_json = _dataset_json(preprocessed_dir, raw_dir)
    configurations = list(dict.fromkeys(args.configurations or configuration_names(plans)))
    group_by_identifier(plans, configurations)  # fail on a bad configuration before writing
    cases = training_cases(raw_dir, dataset_json)
    # before the summaries: they are the last thing written
    copied = copy_gt_segmentations(cases, preprocessed_dir / GT_FOLDER, dataset_json.file_ending)
    summaries = preprocess_dataset(
        raw_dir,
        preprocessed_dir,
        plans,
        configurations,
        dataset_json,
        max(1, args.num_processes),
        plans_sha256=hashlib.sha256(plans_path.read_bytes()).hexdigest(),
        disable_progress=True if args.no_pbar else None,
    )
    for identifier, summary in summaries.items():
        configs = ", ".join(summary["configurations"])
        print(
            f"{preprocessed_dir / identifier}: {len(summary['cases'])} cases ({configs}) "
            f"in {summary['seconds']:.1f} s"
        )
    print(f"{preprocessed_dir / GT_FOLDER}: {copied} label files copied")
    return 0
