"""Flags shared by commands: the root folders, the dataset, the process count."""

from __future__ import annotations

import argparse
import os

from nnunet_core.paths import Roots, resolve_dataset_name


def add_root_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", help="raw root (default: $nnUNet_raw)")
    parser.add_argument("--preprocessed", help="preprocessed root (default: $nnUNet_preprocessed)")
    parser.add_argument("--results", help="results root (default: $nnUNet_results)")


def add_dataset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-d", "--dataset", required=True, help="dataset id (900) or name (Dataset900_Synth)"
    )


def add_processes_flag(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    parser.add_argument(
        "-np",
        "--num-processes",
        type=int,
        default=default if default is not None else default_num_processes(),
        help="worker processes (default: $nnUNet_def_n_proc or the CPU count, max 8)",
    )


def default_num_processes() -> int:
    value = os.environ.get("nnUNet_def_n_proc")
    if value:
        return max(1, int(value))
    return max(1, min(8, os.cpu_count() or 1))


def roots_from_args(args: argparse.Namespace) -> Roots:
    return Roots.from_env(
        raw=getattr(args, "raw", None),
        preprocessed=getattr(args, "preprocessed", None),
        results=getattr(args, "results", None),
    )


def dataset_from_args(args: argparse.Namespace) -> tuple[Roots, str]:
    roots = roots_from_args(args)
    return roots, resolve_dataset_name(args.dataset, roots)
