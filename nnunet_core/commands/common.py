"""Flags shared by commands: the root folders, the dataset, the process count.

Where upstream spells a flag differently (``-gpu_memory_target``, ``--no_pbar``), both spellings
are registered explicitly: argparse would otherwise read an unknown single-dash long flag as a
short one plus a value (``-plans_name`` as ``-p lans_name``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.roots import Roots, resolve_dataset_name

if TYPE_CHECKING:
    from nnunet_core.evaluation.surface import SurfaceSettings


def add_root_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--raw", help="raw root (default: $nnUNet_raw)")
    parser.add_argument("--preprocessed", help="preprocessed root (default: $nnUNet_preprocessed)")
    parser.add_argument("--results", help="results root (default: $nnUNet_results)")


def add_dataset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-d", "--dataset", required=True, help="dataset id (900) or name (Dataset900_Synth)"
    )


def add_datasets_flag(parser: argparse.ArgumentParser) -> None:
    """``-d`` with one or more datasets, as upstream's planning commands."""
    parser.add_argument(
        "-d",
        "--dataset",
        required=True,
        nargs="+",
        metavar="D",
        help="dataset ids (900) or names (Dataset900_Synth); several run one after another",
    )


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (a process count)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        msg = f"expected an integer >= 1, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def add_progress_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-pbar", "--no_pbar", action="store_true", help="never show a progress bar"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="accepted for upstream users; changes nothing"
    )


def add_configuration_processes_flag(parser: argparse.ArgumentParser) -> None:
    """``-np``: one process count for all configurations, or one per configuration (``-c``)."""
    parser.add_argument(
        "-np",
        "--num-processes",
        type=positive_int,
        nargs="+",
        metavar="N",
        default=None,
        help="worker processes: one value for all configurations or one per -c value "
        "(default: $nnUNet_def_n_proc or the CPU count, max 8)",
    )


def processes_per_configuration(
    values: Sequence[int] | None, configurations: Sequence[str]
) -> list[int]:
    """Upstream's pairing: one value serves every configuration, else one value each."""
    if not values:
        return [default_num_processes()] * len(configurations)
    if len(values) == 1:
        return [values[0]] * len(configurations)
    if len(values) != len(configurations):
        msg = (
            f"-np has {len(values)} values {list(values)} for {len(configurations)} "
            f"configurations {list(configurations)}: give one value or one per configuration"
        )
        raise ConfigurationError(msg)
    return list(values)


def require_default_class(flag: str, value: str, default: str) -> None:
    """Upstream's class-name flags: only the default class exists here."""
    if value != default:
        msg = f"{flag} {value!r} is not supported: only {default} is implemented"
        raise ConfigurationError(msg)


def add_processes_flag(parser: argparse.ArgumentParser, default: int | None = None) -> None:
    parser.add_argument(
        "-np",
        "--num-processes",
        type=positive_int,
        default=default if default is not None else default_num_processes(),
        help="worker processes (default: $nnUNet_def_n_proc or the CPU count, max 8)",
    )


def default_num_processes() -> int:
    value = os.environ.get("nnUNet_def_n_proc")
    if value:
        return max(1, int(value))
    return max(1, min(8, os.cpu_count() or 1))


# The roots each command reads its input from; these must exist (a typo is an error naming the
# flag, not a new empty folder). Roots a command only writes to (verify's and fingerprint's
# preprocessed, train's results) are created as upstream does; roots it does not use are not
# looked at. The workflow's roots under work_dir exist by the time each rule reads them.
INPUT_ROOTS: dict[str, tuple[str, ...]] = {
    "verify": ("raw",),
    "fingerprint": ("raw",),
    "extract-fingerprint": ("raw",),
    "plan-and-preprocess": ("raw",),
    "plan": ("raw", "preprocessed"),
    "plan-experiment": ("raw", "preprocessed"),
    "preprocess": ("raw", "preprocessed"),
    "splits": ("raw",),
    "train": ("preprocessed",),
    "crossval": ("preprocessed", "results"),
    "ensemble-cv": ("preprocessed", "results"),
    "find-best-config": ("preprocessed", "results"),
    "predict": ("results",),
    "report": ("results",),
}
ROOT_FLAGS = {"raw": "--raw", "preprocessed": "--preprocessed", "results": "--results"}


def roots_from_args(args: argparse.Namespace) -> Roots:
    """The roots from the flags, else the environment; the command's input roots (``INPUT_ROOTS``)
    must be existing folders."""
    given = {kind: getattr(args, kind, None) for kind in ROOT_FLAGS}
    roots = Roots.from_env(**given)
    command = str(getattr(args, "command", None) or "")
    for kind in INPUT_ROOTS.get(command, ()):
        roots.require_existing(kind, command, ROOT_FLAGS[kind] if given[kind] else "")
    return roots


def dataset_from_args(args: argparse.Namespace) -> tuple[Roots, str]:
    roots = roots_from_args(args)
    return roots, resolve_dataset_name(args.dataset, roots)


def datasets_from_args(args: argparse.Namespace) -> tuple[Roots, list[str]]:
    """Every ``-d`` value resolved (all before any work starts, so a typo fails first)."""
    roots = roots_from_args(args)
    values = [args.dataset] if isinstance(args.dataset, str) else list(args.dataset)
    names = [resolve_dataset_name(value, roots) for value in values]
    return roots, list(dict.fromkeys(names))


def add_surface_flags(parser: argparse.ArgumentParser) -> None:
    """``--surface-metrics`` and ``--nsd-tolerance`` (evaluate, crossval, ensemble-cv)."""
    parser.add_argument(
        "--surface-metrics",
        action="store_true",
        help="also HD95 and normalized surface distance (NSD) per label, in mm",
    )
    parser.add_argument(
        "--nsd-tolerance",
        nargs="+",
        default=[],
        metavar="MM|LABEL=MM",
        help="NSD tolerance in mm: one value for every label (default 1), or LABEL=MM per label "
        "(a region as its key, e.g. '(1, 2)=2')",
    )


def surface_settings(args: argparse.Namespace) -> SurfaceSettings | None:
    """HD95/NSD settings, or None without ``--surface-metrics``; a bad tolerance is exit 2."""
    from nnunet_core.evaluation.surface import settings_from_tolerances

    if args.nsd_tolerance and not args.surface_metrics:
        msg = "--nsd-tolerance needs --surface-metrics"
        raise ConfigurationError(msg)
    if not args.surface_metrics:
        return None
    try:
        return settings_from_tolerances(args.nsd_tolerance)
    except ValueError as exc:
        raise ConfigurationError(f"--nsd-tolerance: {exc}") from None


def add_output_folder_flags(parser: argparse.ArgumentParser, what: str, *names: str) -> None:
    """``-o`` (``names``: its spellings) of a command that writes predictions, which is never a
    raw dataset's folder, and ``--overwrite`` (replace files no prediction command wrote)."""
    from nnunet_core.io.prediction_output import OVERWRITE_HELP, RAW_SPLITS_TEXT

    parser.add_argument(
        *(names or ("-o",)),
        dest="output",
        required=True,
        help=f"{what} (never a raw dataset's {RAW_SPLITS_TEXT})",
    )
    parser.add_argument("--overwrite", action="store_true", help=OVERWRITE_HELP)
