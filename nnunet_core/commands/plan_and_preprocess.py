"""Fingerprint, plan and preprocess in one go (upstream's ``nnUNetv2_plan_and_preprocess``).

The same steps as ``fingerprint``, ``plan`` and ``preprocess`` run one after the other, in
upstream's order: every dataset's fingerprint (after ``verify`` with
``--verify_dataset_integrity``), then every dataset's plans, then the preprocessing (skipped with
``--no_pp``). ``-np`` gives the preprocessing processes (one value, or one per ``-c`` value),
``-npfp`` the fingerprint ones. The fingerprint is always recomputed; ``--clean`` is accepted.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import (
    add_datasets_flag,
    add_root_flags,
    datasets_from_args,
    require_default_class,
)
from nnunet_core.commands.fingerprint import (
    FINGERPRINT_EXTRACTOR,
    add_fingerprint_flags,
    fingerprint_one,
)
from nnunet_core.commands.plan import add_planning_flags, check_planning_args, plan_one
from nnunet_core.commands.preprocess import add_preprocessing_flags, preprocess_one


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_datasets_flag(parser)
    add_root_flags(parser)
    add_fingerprint_flags(parser, "-npfp", "--fingerprint-processes")
    add_planning_flags(parser)
    add_preprocessing_flags(parser)
    parser.add_argument(
        "--no-pp",
        "--no_pp",
        action="store_true",
        help="stop after planning (no preprocessing)",
    )


def run(args: argparse.Namespace) -> int:
    require_default_class("-fpe", args.fpe, FINGERPRINT_EXTRACTOR)
    check_planning_args(args)
    roots, names = datasets_from_args(args)
    command = getattr(args, "command", "plan-and-preprocess")
    print("Fingerprint extraction...")
    for name in names:
        fingerprint_one(
            roots, name, args.fingerprint_processes, args.verify_dataset_integrity, command
        )
    print("Experiment planning...")
    plans_names = {name: plan_one(roots, name, args) for name in names}
    if args.no_pp:
        return 0
    print("Preprocessing...")
    for name in names:
        preprocess_one(
            roots,
            name,
            plans_names[name],
            args.configurations,
            args.num_processes,
            args.no_pbar,
        )
    return 0
