"""Merge one configuration's fold validations into ``crossval_results_folds_*`` and evaluate.

Writes ``summary.json`` there (upstream's ``nnUNetv2_accumulate_crossval_results``). The folder is
rebuilt every time, so a retrained fold is never mixed with stale predictions. ``-o`` also copies
the finished folder there (selection reads the one in the model folder).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from nnunet_core.commands.common import (
    add_processes_flag,
    add_root_flags,
    add_surface_flags,
    surface_settings,
)
from nnunet_core.commands.model_args import (
    add_dataset_argument,
    add_model_flags,
    dataset_dirs_from_args,
    paired_models,
)
from nnunet_core.errors import ConfigurationError


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_argument(parser)
    add_model_flags(parser, "the configuration", required=True)
    add_processes_flag(parser)
    add_root_flags(parser)
    add_surface_flags(parser)
    parser.add_argument("-o", dest="output", help="also copy the merged folder here")


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.crossval import accumulate_crossval
    from nnunet_core.layout.results import SUMMARY_JSON, crossval_dir

    if len(args.configurations) != 1:
        msg = f"crossval takes one configuration, got {args.configurations}"
        raise ConfigurationError(msg)
    dirs = dataset_dirs_from_args(args)
    (model,) = paired_models(args)
    summary = accumulate_crossval(
        dirs, model, args.folds, args.num_processes, surface_settings(args)
    )
    output = crossval_dir(dirs.model_dir(model), args.folds)
    cases = len(summary["metric_per_case"])
    dice = summary["foreground_mean"]["Dice"]
    if args.output:
        shutil.copytree(output, args.output, dirs_exist_ok=True)
        output = Path(args.output)
    print(f"{output / SUMMARY_JSON}: {cases} cases, foreground-mean Dice {dice:.4f}")
    return 0
