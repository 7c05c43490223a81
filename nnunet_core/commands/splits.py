"""Write ``splits_final.json`` once, before any fold trains.

Five folds, shuffled with seed 12345 over the sorted training case ids (upstream's split). A
``splits_final.json`` in the raw dataset folder is taken instead (checked against the cases).
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_dataset_flag, add_root_flags, dataset_from_args
from nnunet_core.dataset.discovery import training_cases
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.preprocessed import SPLITS_JSON
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.roots import preprocessed_dataset_dir, raw_dataset_dir
from nnunet_core.planning.splits import DEFAULT_NUM_FOLDS, DEFAULT_SEED, check_splits, kfold_splits


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    add_root_flags(parser)
    parser.add_argument("--folds", type=int, default=DEFAULT_NUM_FOLDS, help="number of folds (5)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="shuffle seed (12345)")


def run(args: argparse.Namespace) -> int:
    roots, name = dataset_from_args(args)
    raw_dir = raw_dataset_dir(roots, name)
    identifiers = [
        c.identifier for c in training_cases(raw_dir, load_dataset_json(raw_dir / DATASET_JSON))
    ]
    user_file = raw_dir / SPLITS_JSON
    if user_file.is_file():
        splits = read_json(user_file)
        check_splits(splits, identifiers, str(user_file))
        origin = f"copied from {user_file}"
    else:
        splits = kfold_splits(identifiers, args.folds, args.seed)
        origin = f"{args.folds} folds, seed {args.seed}"
    target = preprocessed_dataset_dir(roots, name) / SPLITS_JSON
    write_json(target, splits)
    sizes = ", ".join(str(len(s["val"])) for s in splits)
    print(f"{target}: {len(identifiers)} cases, {origin}; validation cases per fold: {sizes}")
    return 0
