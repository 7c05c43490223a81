"""Download and install a model archive: ``nnunet-core download-pretrained-model-by-url URL``.

Upstream's ``nnUNetv2_download_pretrained_model_by_url``: the zip at ``URL`` is downloaded and
installed into the results root (``--results``, else ``$nnUNet_results``). Only ``https://`` is
downloaded (plain ``http://`` only from this machine); a failed, truncated or non-zip download is
one line naming the URL, with nothing installed (``nnunet_core.model_sharing.download``). The
archive is then installed exactly as ``install-pretrained-model-from-zip`` installs a file, with
the same flags and checks (member paths, zip bombs, trainer code, files it would replace).

The zip is downloaded into a hidden install folder of the results root (``.install-*``: the same
disk as the model, not a small /tmp), deleted afterwards; one that a killed download left is
removed by the next install.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands import install_pretrained_model_from_zip as install_command
from nnunet_core.errors import NnunetCoreError
from nnunet_core.layout.new_scans import cached_download_path
from nnunet_core.layout.roots import Roots
from nnunet_core.model_sharing.download import check_url, download, url_sha256
from nnunet_core.model_sharing.install_staging import staging_folder


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the model archive's URL (https://)")
    install_command.add_install_options(parser)


def _naming_url(exc: NnunetCoreError, archive: Path, url: str) -> NnunetCoreError:
    """The install's error with the URL in place of the temporary file (which is gone)."""
    prefix = f"{archive}: "
    text = str(exc)
    if not text.startswith(prefix):
        return exc
    return type(exc)(f"{url}: {text[len(prefix) :]}")


def run(args: argparse.Namespace) -> int:
    check_url(args.url)  # a refused URL creates nothing, not even the results root
    results_root = Roots.from_env(results=args.results).require_results()
    with staging_folder(results_root) as staging:
        archive = cached_download_path(staging.folder, url_sha256(args.url))
        download(args.url, archive)
        try:
            return install_command.run(argparse.Namespace(**{**vars(args), "zip": str(archive)}))
        except NnunetCoreError as exc:
            raise _naming_url(exc, archive, args.url) from None
