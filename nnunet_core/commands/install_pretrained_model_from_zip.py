"""Install a model archive: ``nnunet-core install-pretrained-model-from-zip model.zip``.

Upstream's ``nnUNetv2_install_pretrained_model_from_zip``: the archive (ours or upstream's
export) is unpacked into the results root (``--results``, else ``$nnUNet_results``), replacing
files of the same name. A member with an absolute path or ``..``, a corrupt member or a file that
is no zip is a one-line error with nothing installed (see ``nnunet_core.model_sharing.install``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.layout.roots import Roots
from nnunet_core.model_sharing.install import install_archive


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("zip", help="the model archive (.zip)")
    parser.add_argument("--results", help="results root (default: $nnUNet_results)")


def run(args: argparse.Namespace) -> int:
    results_root = Roots.from_env(results=args.results).require_results()
    installed = install_archive(Path(args.zip), results_root)
    print(f"installed {', '.join(installed)} into {results_root}")
    return 0
