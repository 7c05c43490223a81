"""Flags that name trained models (``-c``, ``-p``, ``-tr``, ``-f``) and the dataset's folders.

The dataset is upstream's positional ``DATASET`` or our ``-d DATASET`` (either one).
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import dataset_from_args
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.results import DEFAULT_FOLDS, DEFAULT_TRAINER, DatasetDirs, TrainedModel
from nnunet_core.layout.roots import preprocessed_dataset_dir, results_dataset_dir


def add_dataset_argument(parser: argparse.ArgumentParser) -> None:
    """Upstream's positional dataset, and ``-d`` for the commands that had only that."""
    parser.add_argument(
        "dataset_positional", nargs="?", metavar="DATASET", help="dataset id (900) or name"
    )
    parser.add_argument("-d", "--dataset", help="the dataset, as a flag (instead of DATASET)")


def take_dataset(args: argparse.Namespace) -> None:
    """Set ``args.dataset`` from DATASET or ``-d``; both (differing) or neither is an error."""
    positional, flag = getattr(args, "dataset_positional", None), args.dataset
    if positional and flag and positional != flag:
        msg = f"DATASET {positional} and -d {flag} differ; give the dataset once"
        raise ConfigurationError(msg)
    if not (positional or flag):
        msg = "name the dataset: DATASET (as upstream) or -d DATASET"
        raise ConfigurationError(msg)
    args.dataset = positional or flag


def add_model_flags(parser: argparse.ArgumentParser, configurations_help: str, **c_kwargs) -> None:
    parser.add_argument("-c", "--configurations", nargs="+", help=configurations_help, **c_kwargs)
    parser.add_argument(
        "-p", "--plans", nargs="+", default=[DEFAULT_PLANS_NAME], help="plans identifier(s)"
    )
    parser.add_argument(
        "-tr", "--trainer", nargs="+", default=[DEFAULT_TRAINER], help="trainer name(s)"
    )
    parser.add_argument(
        "-f", "--folds", nargs="+", type=int, default=list(DEFAULT_FOLDS), help="folds (0 1 2 3 4)"
    )


def paired_models(args: argparse.Namespace) -> list[TrainedModel]:
    """One model per configuration; ``-p``/``-tr`` give one value for all or one per ``-c``."""
    configs = list(args.configurations)
    columns = []
    for flag, values in (("-p", args.plans), ("-tr", args.trainer)):
        if len(values) not in (1, len(configs)):
            msg = (
                f"{flag} takes one value or one per configuration ({len(configs)}), got "
                f"{len(values)}"
            )
            raise ConfigurationError(msg)
        columns.append(values * len(configs) if len(values) == 1 else values)
    plans, trainers = columns
    return [TrainedModel(c, p, t) for c, p, t in zip(configs, plans, trainers, strict=True)]


def product_models(args: argparse.Namespace) -> list[TrainedModel]:
    """Every trainer x configuration x plans (upstream's find_best_configuration order)."""
    return [
        TrainedModel(c, p, t) for t in args.trainer for c in args.configurations for p in args.plans
    ]


def dataset_dirs_from_args(args: argparse.Namespace) -> DatasetDirs:
    take_dataset(args)
    roots, name = dataset_from_args(args)
    return DatasetDirs(
        name=name,
        results=results_dataset_dir(roots, name),
        preprocessed=preprocessed_dataset_dir(roots, name),
    )
