"""Ensemble the cross-validation of two (or more) configurations and evaluate it.

Averages the validation ``.npz`` probabilities per case into
``results/D/ensembles/ensemble___A___B___0_1_2_3_4/`` and writes its ``summary.json``; one
Snakemake job per pair. The folds must have been validated with ``--npz``.
"""

from __future__ import annotations

import argparse

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


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_argument(parser)
    add_model_flags(parser, "the member configurations (two or more)", required=True)
    add_processes_flag(parser)
    add_root_flags(parser)
    add_surface_flags(parser)


def run(args: argparse.Namespace) -> int:
    from nnunet_core.evaluation.ensemble import ensemble_crossval
    from nnunet_core.layout.results import SUMMARY_JSON, ensemble_name

    dirs = dataset_dirs_from_args(args)
    models = paired_models(args)
    summary = ensemble_crossval(
        dirs, models, args.folds, args.num_processes, surface_settings(args)
    )
    output = dirs.ensembles_dir / ensemble_name(models, args.folds)
    cases = len(summary["metric_per_case"])
    dice = summary["foreground_mean"]["Dice"]
    print(f"{output / SUMMARY_JSON}: {cases} cases, foreground-mean Dice {dice:.4f}")
    return 0
