"""Reuse one dataset's plans for another: ``nnunet-core move-plans-between-datasets -s S -t T
-sp nnUNetPlans -tp nnUNetPlansFromS``.

Upstream's ``nnUNetv2_move_plans_between_datasets`` (for pretraining on S and fine-tuning on T):
reads ``<preprocessed>/S/<sp>.json`` and writes ``<preprocessed>/T/<tp>.json`` (``-tp`` defaults
to ``-sp``: not advised for nnUNetPlans, which T's own planning would overwrite) with T's dataset
name, the plans identifier and the reader T's raw images need; see
``nnunet_core.planning.move_plans``. Then preprocess T with ``-p <tp>``.
"""

from __future__ import annotations

import argparse

from nnunet_core.commands.common import add_root_flags, roots_from_args
from nnunet_core.layout.roots import preprocessed_dataset_dir, raw_dataset_dir, resolve_dataset_name
from nnunet_core.planning.move_plans import move_plans


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-s", dest="source", required=True, help="source dataset name or id")
    parser.add_argument("-t", dest="target", required=True, help="target dataset name or id")
    parser.add_argument(
        "-sp", dest="source_plans", required=True, help="source plans identifier (nnUNetPlans)"
    )
    parser.add_argument(
        "-tp",
        dest="target_plans",
        default=None,
        help="target plans identifier (default: the source's; not advised for nnUNetPlans)",
    )
    add_root_flags(parser)


def run(args: argparse.Namespace) -> int:
    roots = roots_from_args(args)
    source = resolve_dataset_name(args.source, roots)
    target = resolve_dataset_name(args.target, roots)
    written = move_plans(
        preprocessed_dataset_dir(roots, source),
        preprocessed_dataset_dir(roots, target),
        raw_dataset_dir(roots, target),
        args.source_plans,
        args.target_plans,
    )
    print(f"wrote {written} (plans {args.source_plans} of {source} for {target})")
    return 0
