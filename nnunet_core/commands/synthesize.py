"""Write a seeded synthetic nnU-Net raw dataset (body, organ = 1, lesion = 2) for the demo.

The same flags and seed give the same arrays. The dataset appears in ``--output`` only when it is
complete (written to a temporary folder, then renamed); a non-empty ``--output`` needs ``--force``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nnunet_core.dataset.synthesize import FILE_ENDINGS, SynthOptions, synthesize_dataset

DEFAULTS = SynthOptions()


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        required=True,
        help="dataset folder to create, e.g. $nnUNet_raw/Dataset900_Synth",
    )
    parser.add_argument(
        "--num-training", type=int, default=DEFAULTS.num_training, help="training cases (20)"
    )
    parser.add_argument(
        "--num-test",
        type=int,
        default=DEFAULTS.num_test,
        help="test cases with held-out labels (5)",
    )
    parser.add_argument(
        "--shape",
        type=int,
        nargs="+",
        default=list(DEFAULTS.shape),
        metavar="N",
        help="image size Z Y X (32 64 64; Y X with --2d); varies by about +-12%% per case",
    )
    parser.add_argument(
        "--spacing",
        type=float,
        nargs="+",
        default=list(DEFAULTS.spacing),
        metavar="MM",
        help="voxel spacing Z Y X in mm (2.5 0.8 0.8); varies by about +-8%% per case",
    )
    parser.add_argument(
        "--channels", type=int, default=DEFAULTS.channels, help="channels per case (1)"
    )
    parser.add_argument(
        "--2d", dest="two_d", action="store_true", help="2-D images (the last two --shape values)"
    )
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="random seed (0)")
    parser.add_argument(
        "--lesion-scale",
        type=float,
        default=DEFAULTS.lesion_scale,
        metavar="F",
        help="multiply the lesion's radii (1.0: the default data exactly; the demo's is larger)",
    )
    parser.add_argument(
        "--file-ending", default=DEFAULTS.file_ending, choices=FILE_ENDINGS, help="(.nii.gz)"
    )
    parser.add_argument(
        "--name", help="dataset.json name (default: from the folder, Dataset900_Synth -> Synth)"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --output folder")


def run(args: argparse.Namespace) -> int:
    output = Path(args.output)
    options = SynthOptions(
        num_training=args.num_training,
        num_test=args.num_test,
        shape=tuple(args.shape),
        spacing=tuple(args.spacing),
        channels=args.channels,
        two_d=args.two_d,
        seed=args.seed,
        lesion_scale=args.lesion_scale,
        file_ending=args.file_ending,
        name=args.name,
    )
    start = time.perf_counter()
    cases = synthesize_dataset(output, options, force=args.force)
    elapsed = time.perf_counter() - start
    print(
        f"{output}: {len(cases)} cases ({args.num_training} training, {args.num_test} test), "
        f"{args.channels} channel(s), seed {args.seed}, {elapsed:.1f} s"
    )
    return 0
