"""The train command's flags (upstream's nnUNetv2_train spellings plus ours) and their checks.

Kept apart from ``commands.train`` so that parsing and checking never import torch.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nnunet_core.commands.common import add_root_flags
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.preprocessed import DEFAULT_PLANS_NAME, SPLITS_JSON
from nnunet_core.layout.results import CHECKPOINT_BEST, DEFAULT_TRAINER, parse_fold
from nnunet_core.tracking import BACKENDS, TrackingChoice, check_installed
from nnunet_core.training.fold.settings_table import flag_help, setting
from nnunet_core.training.limits import (
    MAX_EPOCHS,
    MAX_GPUS,
    MAX_ITERATIONS,
    MAX_SEED,
    MAX_STOP_MARGIN,
    MAX_WORKERS,
)
from nnunet_core.training.trainer.lookup import check_trainer_name
from nnunet_core.training.trainer.variants import (
    DEFAULT_EPOCHS,
    known_trainer_names,
    parse_trainer_name,
)

if TYPE_CHECKING:
    from nnunet_core.training.trainer.settings import TrainerSettings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset id (900) or name (Dataset900_Synth)")
    parser.add_argument("configuration", help="configuration in the plans, e.g. 3d_fullres")
    parser.add_argument("fold", help=f"fold: an index of {SPLITS_JSON} (0-4 for 5 folds), or 'all'")
    parser.add_argument(
        "-tr",
        dest="trainer",
        default=DEFAULT_TRAINER,
        help=f"trainer: {', '.join(known_trainer_names())}; or your own: package.module:Class, "
        "/path/to/file.py:Class, or Class in a folder of $nnUNet_extTrainer",
    )
    parser.add_argument("-p", dest="plans", default=DEFAULT_PLANS_NAME, help="plans name")
    parser.add_argument(
        "-pretrained_weights",
        help="checkpoint to initialise the network from (every tensor but the segmentation "
        "heads must fit); with --c only when the fold has no checkpoint of its own yet",
    )
    parser.add_argument("-num_gpus", type=int, default=1, help="GPUs (processes) for this fold")
    parser.add_argument("--npz", action="store_true", help=setting("training.npz").help)
    parser.add_argument(
        "--c",
        action="store_true",
        help="continue from the fold's newest checkpoint (final, latest, best); without one "
        "start from -pretrained_weights if given, else fresh",
    )
    parser.add_argument("--val", action="store_true", help="only run the final validation")
    parser.add_argument("--val_best", action="store_true", help="validate checkpoint_best")
    parser.add_argument("--disable_checkpointing", action="store_true", help="write no checkpoints")
    parser.add_argument(
        "-device",
        choices=("auto", "cuda", "cpu", "mps"),
        help="auto (default): cuda if torch sees a GPU, else cpu with a warning",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        help=f"{setting('training.epochs').help} (>= 1; default: the trainer's, "
        f"{setting('training.epochs').default} for nnUNetTrainer)",
    )
    for key in (
        "training.iterations_per_epoch",
        "training.val_iterations_per_epoch",
        "training.save_every",
        "seed",
    ):
        add_setting_flag(parser, key)
    parser.add_argument(
        "--num-workers", type=int, help="data workers (default $nnUNet_n_proc_DA, else the CPUs)"
    )
    parser.add_argument(
        "--gpu-lock-dir",
        help="folder of the GPU slot locks, not used where SLURM or LSF set CUDA_VISIBLE_DEVICES "
        "(default $nnUNet_gpu_lock_dir, else <tmp>/nnunet_core_gpu_locks-<uid>; a private "
        "folder: refused if it is a link, not yours or writable by others)",
    )
    parser.add_argument(
        "--deadline",
        help="stop cleanly (checkpoint_latest, exit 75; --c continues) when the next epoch would "
        "end after this: "
        "seconds from now, HH:MM[:SS] or an ISO date-time (default: the SLURM job's end time)",
    )
    add_setting_flag(parser, "training.stop_margin")
    parser.add_argument("--deterministic", action="store_true", help=setting("deterministic").help)
    add_tracking_flags(parser)
    add_root_flags(parser)


def add_tracking_flags(parser: argparse.ArgumentParser) -> None:
    """Experiment tracking (docs/tracking.md); the workflow passes config ``tracking`` here."""
    parser.add_argument(
        "--tracking",
        choices=BACKENDS,
        help="track the fold's epochs and results in MLflow or Weights & Biases (default none; "
        "nnUNet_wandb_enabled=1 as upstream's: wandb); needs the extra of that name",
    )
    parser.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI, e.g. a lab's server (default: sqlite:///<results>/mlflow.db)",
    )
    parser.add_argument(
        "--tracking-experiment",
        help="MLflow experiment or W&B project (default: the dataset; W&B: "
        "$nnUNet_wandb_project, else nnunet)",
    )
    parser.add_argument(
        "--tracking-mode", choices=("online", "offline"), help="W&B mode (default $WANDB_MODE)"
    )
    parser.add_argument(
        "--tracking-tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a tag of the run (repeatable), e.g. method=baseline",
    )


def tracking_choice(args: argparse.Namespace) -> TrackingChoice:
    """The ``--tracking*`` flags (else upstream's W&B switches); a missing package is one line."""
    tags = {}
    for tag in args.tracking_tag:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            msg = f"--tracking-tag {tag}: expected KEY=VALUE"
            raise ConfigurationError(msg)
        tags[key] = value
    choice = TrackingChoice.of_command(
        args.tracking, args.tracking_uri, args.tracking_experiment, args.tracking_mode, tags
    )
    check_installed(choice.backend)
    return choice


def add_setting_flag(parser: argparse.ArgumentParser, key: str) -> None:
    """A value flag of the settings table (training.fold.settings_table): its name, type, default
    and help are the table's, so the parser, the workflow's schema and TrainerSettings agree."""
    row = setting(key)
    parser.add_argument(
        row.flag, type=row.value_type, default=row.parser_default, help=flag_help(key)
    )


def check_flags(args: argparse.Namespace) -> None:
    """Upstream's forbidden combinations, as one-line errors.

    Unlike upstream, ``--c`` and ``-pretrained_weights`` go together: the fold's own checkpoint
    when it has one, else the pretrained weights, so a workflow passes both to every attempt and
    only the first starts from the pretrained file.
    """
    if args.c and args.val:
        msg = "--c and --val exclude each other (--val only validates a finished training)"
        raise ConfigurationError(msg)
    if args.val_best and args.disable_checkpointing:
        msg = f"--val_best needs {CHECKPOINT_BEST}, which --disable_checkpointing never writes"
        raise ConfigurationError(msg)
    parse_fold(args.fold)  # a fold beyond splits_final.json is found when the split is read
    # --epochs 0 is refused, never read as "the trainer's default" (1000); the maxima are far
    # beyond any real run (nnunet_core.training.limits): a typo is one line, not an endless run
    for flag, value, least, most in (
        ("--epochs", args.epochs, 1, MAX_EPOCHS),
        ("-num_gpus", args.num_gpus, 1, MAX_GPUS),
        ("--iterations", args.iterations, 1, MAX_ITERATIONS),
        ("--val-iterations", args.val_iterations, 1, MAX_ITERATIONS),
        ("--save-every", args.save_every, 1, MAX_EPOCHS),
        ("--num-workers", args.num_workers, 0, MAX_WORKERS),
        ("--stop-margin", args.stop_margin, 0, MAX_STOP_MARGIN),
        ("--seed", args.seed, 0, MAX_SEED),
    ):
        if value is None:
            continue
        if not value >= least:  # NaN too
            msg = f"{flag} must be >= {least}, got {value}"
            raise ConfigurationError(msg)
        if value > most:
            msg = f"{flag} must be <= {most}, got {value}"
            raise ConfigurationError(msg)


def settings_from_args(args: argparse.Namespace, is_main: bool = True) -> TrainerSettings:
    from nnunet_core.training.trainer.settings import TrainerSettings

    try:
        user_code = check_trainer_name(args.trainer)  # a user's trainer: nnUNetTrainer's epochs
    except ConfigurationError as exc:
        msg = f"-tr {args.trainer}: {exc}"
        raise ConfigurationError(msg) from None
    default = DEFAULT_EPOCHS if user_code else parse_trainer_name(args.trainer).num_epochs
    epochs = default if args.epochs is None else args.epochs  # 0 fails in check()
    return TrainerSettings(
        num_epochs=epochs,
        num_iterations=args.iterations,
        num_val_iterations=args.val_iterations,
        save_every=args.save_every,
        seed=args.seed,
        num_workers=args.num_workers,
        disable_checkpointing=args.disable_checkpointing,
        trainer_name=args.trainer,
        is_main=is_main,
    )
