"""Write a seeded synthetic nnU-Net raw dataset (body, organ = 1, lesion = 2) for the demo, or
with ``--preset ct|mr`` one at the size users bring (``dataset.realscale``).

The same flags and seed give the same arrays. The dataset appears in ``--output`` only when it is
complete (written to a temporary folder, then renamed); a non-empty ``--output`` needs ``--force``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nnunet_core.dataset.realscale import PRESETS, synthesize_realscale
from nnunet_core.dataset.synthesize import FILE_ENDINGS, SynthOptions, synthesize_dataset
from nnunet_core.errors import ConfigurationError

DEFAULTS = SynthOptions()
# with --preset: a handful of cases (each is 10-50 MB on disk and 100 MB in memory)
PRESET_CASES = (4, 1)
# the demo's shape flags, which a preset fixes itself (given with --preset: refused)
PHANTOM_FLAGS = {
    "shape": "--shape",
    "spacing": "--spacing",
    "channels": "--channels",
    "two_d": "--2d",
    "lesion_scale": "--lesion-scale",
    "file_ending": "--file-ending",
}


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        required=True,
        help="dataset folder to create, e.g. $nnUNet_raw/Dataset900_Synth",
    )
    parser.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help="real-size data instead of the demo's phantoms: ct (512 x 512 x 80-120 at ~0.7 x 0.7 "
        "x 2.5 mm, int16 HU; plans 3d_lowres and the cascade) or mr (256^3 at 1 mm); "
        "--num-training, --num-test, --seed, --slices, --name and --force apply, the shape "
        "flags do not",
    )
    parser.add_argument(
        "--slices",
        type=int,
        metavar="N",
        help="with --preset ct: every case has N slices (default: 80-120, varying per case)",
    )
    parser.add_argument(
        "--num-training",
        type=int,
        help=f"training cases ({DEFAULTS.num_training}; {PRESET_CASES[0]} with --preset)",
    )
    parser.add_argument(
        "--num-test",
        type=int,
        help=f"test cases with held-out labels ({DEFAULTS.num_test}; "
        f"{PRESET_CASES[1]} with --preset)",
    )
    parser.add_argument(
        "--shape",
        type=int,
        nargs="+",
        metavar="N",
        help="image size Z Y X (32 64 64; Y X with --2d); varies by about +-12%% per case",
    )
    parser.add_argument(
        "--spacing",
        type=float,
        nargs="+",
        metavar="MM",
        help="voxel spacing Z Y X in mm (2.5 0.8 0.8); varies by about +-8%% per case",
    )
    parser.add_argument("--channels", type=int, help="channels per case (1)")
    parser.add_argument(
        "--2d",
        dest="two_d",
        action="store_const",
        const=True,
        help="2-D images (the last two --shape values)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed, help="random seed (0)")
    parser.add_argument(
        "--lesion-scale",
        type=float,
        metavar="F",
        help="multiply the lesion's radii (1.0: the default data exactly; the demo's is larger)",
    )
    parser.add_argument("--file-ending", choices=FILE_ENDINGS, help=f"({DEFAULTS.file_ending})")
    parser.add_argument(
        "--name", help="dataset.json name (default: from the folder, Dataset900_Synth -> Synth)"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --output folder")


def run_preset(args: argparse.Namespace) -> int:
    """``--preset``: refuse the demo's shape flags (the preset fixes them), then write."""
    given = [flag for key, flag in PHANTOM_FLAGS.items() if getattr(args, key) is not None]
    if given:
        msg = f"--preset {args.preset} sets the image geometry itself; drop {', '.join(given)}"
        raise ConfigurationError(msg)
    training, test = (
        PRESET_CASES[0] if args.num_training is None else args.num_training,
        PRESET_CASES[1] if args.num_test is None else args.num_test,
    )
    start = time.perf_counter()
    output = synthesize_realscale(
        args.output,
        args.preset,
        training,
        test,
        args.seed,
        args.slices,
        force=args.force,
        name=args.name,
    )
    print(
        f"{output}: {training + test} cases ({training} training, {test} test), preset "
        f"{args.preset}, seed {args.seed}, {time.perf_counter() - start:.1f} s"
    )
    return 0


def _default(value: object, fallback: object) -> object:
    return fallback if value is None else value


def run(args: argparse.Namespace) -> int:
    if args.preset is not None:
        return run_preset(args)
    if args.slices is not None:
        msg = "--slices needs --preset ct"
        raise ConfigurationError(msg)
    output = Path(args.output)
    options = SynthOptions(
        num_training=_default(args.num_training, DEFAULTS.num_training),
        num_test=_default(args.num_test, DEFAULTS.num_test),
        shape=tuple(_default(args.shape, DEFAULTS.shape)),
        spacing=tuple(_default(args.spacing, DEFAULTS.spacing)),
        channels=_default(args.channels, DEFAULTS.channels),
        two_d=bool(args.two_d),
        seed=args.seed,
        lesion_scale=_default(args.lesion_scale, DEFAULTS.lesion_scale),
        file_ending=_default(args.file_ending, DEFAULTS.file_ending),
        name=args.name,
    )
    start = time.perf_counter()
    cases = synthesize_dataset(output, options, force=args.force)
    elapsed = time.perf_counter() - start
    print(
        f"{output}: {len(cases)} cases ({options.num_training} training, {options.num_test} "
        f"test), {options.channels} channel(s), seed {args.seed}, {elapsed:.1f} s"
    )
    return 0
