"""Preprocess the training cases: crop, normalize, resample, store as blosc2 (upstream's method).

Reads ``$preprocessed/D/<plans>.json`` and the raw cases; writes one folder per data identifier
(configurations sharing one are preprocessed once). Each folder is built aside and swapped in
when complete, and ``<data_identifier>/preprocess_summary.json`` is written last, so a crash
leaves no half-written folder and a rerun starts clean. Unverified raw data is refused: ``verify``
runs first unless ``verify.json`` is current (``commands.verify.ensure_verified``). labelsTr is
copied to ``gt_segmentations/`` for evaluation. Upstream's spellings work (``-plans_name``,
``--no_pbar``, ``-np 4 8``: one process count per configuration); ``-d`` takes several datasets.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from nnunet_core.commands.common import (
    add_configuration_processes_flag,
    add_datasets_flag,
    add_progress_flags,
    add_root_flags,
    datasets_from_args,
    processes_per_configuration,
)
from nnunet_core.commands.verify import ensure_verified
from nnunet_core.dataset.discovery import RawCase, training_cases
from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME, GT_FOLDER, plans_file
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, raw_dataset_dir


def add_preprocessing_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared with ``plan-and-preprocess``: configurations, processes, progress."""
    parser.add_argument(
        "-c",
        "--configurations",
        nargs="+",
        metavar="CONFIG",
        help="configurations to preprocess (default: every configuration in the plans); "
        "one that is not in the plans is skipped, as upstream",
    )
    add_configuration_processes_flag(parser)
    add_progress_flags(parser)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_datasets_flag(parser)
    add_root_flags(parser)
    parser.add_argument(
        "-p",
        "--plans-name",
        "-plans_name",
        default=DEFAULT_PLANS_NAME,
        help="plans file name (nnUNetPlans)",
    )
    add_preprocessing_flags(parser)


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


def planned_configurations(
    plans: Plans,
    requested: Sequence[str] | None,
    processes: Sequence[int] | None,
    where: str,
) -> dict[str, int]:
    """Requested configuration -> its process count; those not in the plans are skipped.

    Upstream skips them with an INFO line (its default ``-c 2d 3d_fullres 3d_lowres`` names
    3d_lowres, which most datasets lack); nothing left to do is an error here.
    """
    available = plans.configuration_names
    names = list(requested or available)
    chosen: dict[str, int] = {}
    for name, count in zip(names, processes_per_configuration(processes, names), strict=True):
        if name not in available:
            print(f"INFO: configuration {name} is not in {where}; skipped")
        else:
            chosen.setdefault(name, count)
    if not chosen:
        msg = f"none of the configurations {names} is in {where} (it has {', '.join(available)})"
        raise ConfigurationError(msg)
    return chosen


def preprocess_one(
    roots: Roots,
    name: str,
    plans_name: str,
    requested: Sequence[str] | None,
    processes: Sequence[int] | None,
    no_pbar: bool = False,
    command: str = "preprocess",
) -> None:
    """Preprocess one dataset's configurations and copy its labels to gt_segmentations (after
    ``verify`` unless ``verify.json`` is current)."""
    # imported here: the CLI imports every command module just to build its parser
    from nnunet_core.preprocessing.preprocessing_config import group_by_identifier
    from nnunet_core.preprocessing.preprocessor import preprocess_dataset

    raw_dir = raw_dataset_dir(roots, name)
    preprocessed_dir = preprocessed_dataset_dir(roots, name)
    plans_path = plans_file(preprocessed_dir, plans_name)
    plans = Plans.load(plans_path)
    dataset_json = _dataset_json(preprocessed_dir, raw_dir)
    chosen = planned_configurations(plans, requested, processes, f"{plans_path.name} of {name}")
    groups = group_by_identifier(plans, list(chosen))  # fail on a bad configuration before writing
    ensure_verified(roots, name, max(chosen.values()), command)
    cases = training_cases(raw_dir, dataset_json)
    # before the summaries: they are the last thing written
    copied = copy_gt_segmentations(cases, preprocessed_dir / GT_FOLDER, dataset_json.file_ending)
    # one pass over the cases for all data identifiers, unless -np differs between them
    counts = {chosen[group.configurations[0]] for group in groups}
    passes = (
        [(list(chosen), counts.pop())]
        if len(counts) == 1
        else [(list(g.configurations), chosen[g.configurations[0]]) for g in groups]
    )
    digest = hashlib.sha256(plans_path.read_bytes()).hexdigest()
    for configurations, count in passes:
        summaries = preprocess_dataset(
            raw_dir,
            preprocessed_dir,
            plans,
            configurations,
            dataset_json,
            count,
            plans_sha256=digest,
            disable_progress=True if no_pbar else None,
        )
        for identifier, summary in summaries.items():
            configs = ", ".join(summary["configurations"])
            print(
                f"{preprocessed_dir / identifier}: {len(summary['cases'])} cases ({configs}) "
                f"in {summary['seconds']:.1f} s"
            )
    print(f"{preprocessed_dir / GT_FOLDER}: {copied} label files copied")


def run(args: argparse.Namespace) -> int:
    roots, names = datasets_from_args(args)
    for name in names:
        preprocess_one(
            roots,
            name,
            args.plans_name,
            args.configurations,
            args.num_processes,
            args.no_pbar,
            getattr(args, "command", "preprocess"),
        )
    return 0
