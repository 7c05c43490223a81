"""Pick the best configuration or pair of configurations by cross-validation, and its postprocessing.

Candidates are the configurations and (unless ``--disable_ensembling``) every pair, scored by
the foreground-mean Dice of their cross-validation; ties go to the single configuration. Reuses
cross-validation and ensemble summaries that are newer than the folds' validation outputs
(``--overwrite`` recomputes them). Writes ``results/D/inference_information.json``,
``inference_instructions.txt`` and the winner's ``postprocessing.json``.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_dataset_flag, add_processes_flag, add_root_flags
from nnunet_core.commands.model_args import add_model_flags, dataset_dirs_from_args, product_models

DEFAULT_CONFIGURATIONS = ["2d", "3d_fullres", "3d_lowres", "3d_cascade_fullres"]


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
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


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.selection import INFERENCE_INFORMATION, find_best_configuration

    dirs = dataset_dirs_from_args(args)
    info = find_best_configuration(
        dirs,
        product_models(args),
        args.folds,
        allow_ensembling=not args.disable_ensembling,
        num_processes=args.num_processes,
        overwrite=args.overwrite,
    )
    for identifier, score in info["all_results"].items():
        print(f"{identifier}: {score:.4f}")
    best = info["best_model_or_ensemble"]
    steps = len(info["postprocessing"]["steps"])
    print(
        f"best: {info['winner']} ({best['result_on_crossval_pre_pp']:.4f}; "
        f"{best['result_on_crossval_post_pp']:.4f} after {steps} postprocessing step(s))"
    )
    print(f"wrote {dirs.results / INFERENCE_INFORMATION}")
    return 0
