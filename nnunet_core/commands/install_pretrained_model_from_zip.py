"""Install a model archive: ``nnunet-core install-pretrained-model-from-zip model.zip``.

Upstream's ``nnUNetv2_install_pretrained_model_from_zip``: the archive (ours or upstream's
export) is unpacked into the results root (``--results``, else ``$nnUNet_results``). Unlike
upstream it never changes an installed model silently: a file it would replace with other bytes
is refused unless ``--overwrite`` (then each replaced file is printed, one per line), and trainer
code never enters a built-in trainer's model folder or an installed folder without it. A member
with an absolute path or ``..``, a corrupt member, a zip bomb (``--max-size-gb``,
``--max-ratio``) or a file that is no zip is a one-line error with nothing installed (see
``nnunet_core.model_sharing.install``). A model that carries its trainer's code is named with the
file and its sha256: ``predict`` runs that code only with ``--trust-model-code``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.extension.consent import TRUST_FLAG
from nnunet_core.io.archive_limits import (
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_SIZE_GIB,
    RATIO_FLOOR_BYTES,
    ArchiveLimits,
)
from nnunet_core.layout.roots import Roots
from nnunet_core.model_sharing.install import install_archive


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("zip", help="the model archive (.zip)")
    add_install_options(parser)


def add_install_options(parser: argparse.ArgumentParser) -> None:
    """The flags of an install (also ``download-pretrained-model-by-url``'s)."""
    parser.add_argument("--results", help="results root (default: $nnUNet_results)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace installed files that the archive brings with other content (each is "
        "listed); without it such an archive is refused and nothing is installed",
    )
    parser.add_argument(
        "--max-size-gb",
        type=float,
        default=DEFAULT_MAX_SIZE_GIB,
        metavar="GIB",
        help=f"refuse an archive that unpacks to more than this many GiB "
        f"({DEFAULT_MAX_SIZE_GIB:g}; real models are a few GB)",
    )
    parser.add_argument(
        "--max-ratio",
        type=float,
        default=DEFAULT_MAX_RATIO,
        help=f"refuse a member above {RATIO_FLOOR_BYTES >> 20} MiB that unpacks to more than "
        f"this many times its compressed size ({DEFAULT_MAX_RATIO:g}; checkpoints are ~1.1)",
    )


def run(args: argparse.Namespace) -> int:
    limits = ArchiveLimits(args.max_size_gb, args.max_ratio)
    results_root = Roots.from_env(results=args.results).require_results()
    done = install_archive(Path(args.zip), results_root, overwrite=args.overwrite, limits=limits)
    for folder in done.removed_staging:
        print(f"removed {folder}, left by an install that was stopped")
    for path in done.replaced:
        print(f"replaced {path}")
    print(f"installed {', '.join(done.names)} into {results_root}")
    for code in done.carried:
        print(
            f"model {code.model_dir} carries trainer code {code.describe()}; predict runs it "
            f"only with {TRUST_FLAG}"
        )
    return 0
