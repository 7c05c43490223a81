"""PNGs of the slice with the most foreground of every training case, labels overlaid in colour:
``nnunet-core plot-overlay-pngs -d D -o OUT``.

Upstream's ``nnUNetv2_plot_overlay_pngs`` with its flags: ``--use_raw`` draws ``imagesTr`` under
``labelsTr`` (read with the dataset's reader), else the preprocessed data of configuration ``-c``
(default 3d_fullres, else 2d) of plans ``-p`` (default nnUNetPlans), which is resampled and
normalized and may be transposed. One ``OUT/<case>.png`` per case, each written atomically; the
slice is upstream's choice (``nnunet_core.visualization.overlay.select_slice``) and spacing is
ignored, as upstream. Unlike upstream, a label has one colour in every PNG (``colour_of``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import (
    add_dataset_flag,
    add_processes_flag,
    add_root_flags,
    roots_from_args,
)
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME
from nnunet_core.layout.raw import IMAGES_TR, LABELS_TR
from nnunet_core.layout.roots import resolve_dataset_name
from nnunet_core.runtime.parallel import map_cases
from nnunet_core.visualization.overlay import DEFAULT_OVERLAY_INTENSITY
from nnunet_core.visualization.overlay_cases import (
    draw_preprocessed_case,
    draw_raw_case,
    preprocessed_tasks,
    raw_tasks,
)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    parser.add_argument("-o", "--output", required=True, help="output folder for <case>.png")
    add_processes_flag(parser)
    parser.add_argument(
        "-channel_idx",
        "--channel-idx",
        dest="channel_idx",
        type=int,
        default=0,
        help="input channel drawn (0 = _0000; default 0)",
    )
    parser.add_argument(
        "--use_raw",
        "--use-raw",
        dest="use_raw",
        action="store_true",
        help=f"draw the raw {IMAGES_TR}/{LABELS_TR} instead of the preprocessed data",
    )
    parser.add_argument(
        "-p",
        "-plans_name",
        "--plans-name",
        dest="plans_name",
        default=DEFAULT_PLANS_NAME,
        help=f"plans identifier, without --use_raw only (default {DEFAULT_PLANS_NAME})",
    )
    parser.add_argument(
        "-c",
        "--configuration",
        dest="configuration",
        default=None,
        help="configuration, without --use_raw only (default 3d_fullres if planned, else 2d)",
    )
    parser.add_argument(
        "-overlay_intensity",
        "--overlay-intensity",
        dest="overlay_intensity",
        type=float,
        default=DEFAULT_OVERLAY_INTENSITY,
        help="weight of the label colours: higher is brighter, less transparent "
        f"(default {DEFAULT_OVERLAY_INTENSITY})",
    )
    add_root_flags(parser)


def run(args: argparse.Namespace) -> int:
    if not args.overlay_intensity >= 0:  # also refuses nan
        msg = f"-overlay_intensity must be >= 0, got {args.overlay_intensity}"
        raise ConfigurationError(msg)
    roots = roots_from_args(args)
    kind = "raw" if args.use_raw else "preprocessed"
    flag = f"--{kind}" if getattr(args, kind) else ""
    root = roots.require_existing(kind, "plot-overlay-pngs", flag)  # before the id is looked up
    name = resolve_dataset_name(args.dataset, roots)
    output = Path(args.output)
    if args.use_raw:
        tasks = raw_tasks(root / name, output, args.channel_idx, args.overlay_intensity)
        draw = draw_raw_case
    else:
        tasks = preprocessed_tasks(
            root / name,
            args.plans_name,
            args.configuration,
            output,
            args.channel_idx,
            args.overlay_intensity,
        )
        draw = draw_preprocessed_case
    map_cases(draw, tasks, args.num_processes, "overlay PNGs")
    source = "raw data" if args.use_raw else f"plans {args.plans_name}"
    print(f"wrote {len(tasks)} overlay PNGs of {name} ({source}) to {output}")
    return 0
