"""Pick the best configuration or pair of configurations by cross-validation, and its
postprocessing.

Candidates are the configurations and (unless ``--disable_ensembling``) every pair, scored by
the foreground-mean Dice of their cross-validation; ties go to the single configuration. Reuses
cross-validation and ensemble summaries that are newer than the folds' validation outputs
(``--overwrite`` recomputes them; upstream's ``--no_overwrite`` is our default). Writes
``results/D/inference_information.json``, ``inference_instructions.txt`` (commands that run as
printed from this command's working directory: they repeat its root folders) and the winner's
``postprocessing.json``.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_processes_flag, add_root_flags, roots_from_args
from nnunet_core.commands.model_args import (
    add_dataset_argument,
    add_model_flags,
    dataset_dirs_from_args,
    product_models,
)
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.roots import Roots

DEFAULT_CONFIGURATIONS = ["2d", "3d_fullres", "3d_lowres", "3d_cascade_fullres"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_argument(parser)
    add_model_flags(
        parser,
        "configurations to consider (default: 2d 3d_fullres 3d_lowres 3d_cascade_fullres, "
        "those in the plans)",
        default=DEFAULT_CONFIGURATIONS,
    )
    add_processes_flag(parser)
    add_root_flags(parser)
    parser.add_argument(
        "--disable_ensembling", action="store_true", help="consider single configurations only"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="recompute summaries even when up to date"
    )
    parser.add_argument(
        "--no_overwrite",
        action="store_true",
        help="upstream's flag: reuse up-to-date summaries (our default; stale ones are redone)",
    )


def root_flags(roots: Roots) -> list[str]:
    """``--raw R --preprocessed P --results X`` for the roots this command used, as given
    (a relative root stays relative to the working directory)."""
    flags = []
    for flag, value in (
        ("--raw", roots.raw),
        ("--preprocessed", roots.preprocessed),
        ("--results", roots.results),
    ):
        if value is not None:
            flags += [flag, str(value)]
    return flags


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.selection import find_best_configuration
    from nnunet_core.layout.results import inference_information_file

    if args.overwrite and args.no_overwrite:
        msg = "--overwrite and --no_overwrite exclude each other"
        raise ConfigurationError(msg)
    dirs = dataset_dirs_from_args(args)
    info = find_best_configuration(
        dirs,
        product_models(args),
        args.folds,
        allow_ensembling=not args.disable_ensembling,
        num_processes=args.num_processes,
        overwrite=args.overwrite,
        root_flags=root_flags(roots_from_args(args)),
    )
    for identifier, score in info["all_results"].items():
        print(f"{identifier}: {score:.4f}")
    best = info["best_model_or_ensemble"]
    steps = len(info["postprocessing"]["steps"])
    print(
        f"best: {info['winner']} ({best['result_on_crossval_pre_pp']:.4f}; "
        f"{best['result_on_crossval_post_pp']:.4f} after {steps} postprocessing step(s))"
    )
    print(f"wrote {inference_information_file(dirs.results)}")
    return 0
