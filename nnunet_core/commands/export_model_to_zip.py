"""Export trained models as a zip: ``nnunet-core export-model-to-zip -d D -o model.zip``.

Upstream's ``nnUNetv2_export_model_to_zip`` with its flags and archive layout (member names
relative to the results root, see ``nnunet_core.model_sharing.export``), so the archive installs
with ``nnUNetv2_install_pretrained_model_from_zip`` as well as with ours. ``--not_strict`` skips
configurations that were not trained (upstream's flag is declared ``store_false`` and so never
takes effect there). Checkpoints are copied as bytes. The zip appears only when complete.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import add_root_flags, dataset_from_args
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.results import CHECKPOINT_FINAL, DEFAULT_TRAINER, parse_fold
from nnunet_core.model_sharing.export import ExportRequest, archive_files, write_archive

# upstream's default -c (its order)
DEFAULT_CONFIGURATIONS = ("3d_lowres", "3d_fullres", "2d", "3d_cascade_fullres")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", dest="dataset", required=True, help="dataset name or id")
    parser.add_argument("-o", dest="output", required=True, help="the zip file to write")
    parser.add_argument(
        "-c",
        dest="configurations",
        nargs="+",
        default=list(DEFAULT_CONFIGURATIONS),
        help=f"configurations (default: {' '.join(DEFAULT_CONFIGURATIONS)})",
    )
    parser.add_argument("-tr", dest="trainer", default=DEFAULT_TRAINER, help="trainer name")
    parser.add_argument("-p", dest="plans", default=DEFAULT_PLANS_NAME, help="plans identifier")
    parser.add_argument(
        "-f", dest="folds", nargs="+", default=["0", "1", "2", "3", "4"], help="folds or 'all'"
    )
    parser.add_argument(
        "-chk",
        dest="checkpoints",
        nargs="+",
        default=[CHECKPOINT_FINAL],
        help=f"checkpoint file names to export (default: {CHECKPOINT_FINAL})",
    )
    parser.add_argument(
        "--not_strict", action="store_true", help="skip configurations that were not trained"
    )
    parser.add_argument(
        "--exp_cv_preds",
        action="store_true",
        help="also export the cross-validation predictions (not their .npz/.pkl files)",
    )
    add_root_flags(parser)


def run(args: argparse.Namespace) -> int:
    roots, name = dataset_from_args(args)
    results_root = roots.require_existing(
        "results", "export-model-to-zip", "--results" if args.results else ""
    )
    request = ExportRequest(
        dataset=name,
        configurations=list(dict.fromkeys(args.configurations)),
        trainer=args.trainer,
        plans=args.plans,
        folds=[parse_fold(f) for f in args.folds],
        checkpoints=list(dict.fromkeys(args.checkpoints)),
        strict=not args.not_strict,
        crossval_predictions=args.exp_cv_preds,
    )
    files = archive_files(results_root, request)
    output = Path(args.output)
    write_archive(results_root, files, output)
    print(f"wrote {output}: {len(files)} file(s) of {name}")
    return 0
