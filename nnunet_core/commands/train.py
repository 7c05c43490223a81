"""Train one fold: ``nnunet-core train DATASET CONFIGURATION FOLD`` (upstream's nnUNetv2_train).

Results go to ``$nnUNet_results/D/<trainer>__<plans>__<configuration>/fold_<k>/``. With ``--c``
training continues from checkpoint_final, else checkpoint_latest, else checkpoint_best, else it
starts from ``-pretrained_weights`` when given, else fresh (with a warning). After training the
fold's validation cases are predicted into ``validation/`` with ``summary.json``; ``--val`` only
redoes that from ``checkpoint_final.pth``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nnunet_core.commands.common import roots_from_args
from nnunet_core.commands.train_args import (
    check_flags,
    configure_parser,
    settings_from_args,
    tracking_choice,
)
from nnunet_core.layout.results import parse_fold
from nnunet_core.layout.roots import resolve_dataset_name
from nnunet_core.runtime.devices import resolve_device

if TYPE_CHECKING:  # torch and the trainer load only when a command runs (the CLI stays fast)
    from nnunet_core.training.fold.run import FoldRequest

__all__ = ["check_flags", "configure_parser", "fold_request", "run", "settings_from_args"]


def launch(args: argparse.Namespace) -> int | None:
    """Start the DDP workers or join the launcher's group; None: go on as one plain process.

    The spawned/launched ranks come back into ``run`` with ``args._topology`` set.
    """
    from nnunet_core.training import distributed as ddp

    if getattr(args, "_topology", None) is not None:
        return None
    mode = ddp.launch_mode(args.num_gpus)
    if mode != ddp.EXTERNAL:  # before CUDA starts
        from nnunet_core.cluster.gpu_slots import take_slots_for

        take_slots_for(args.device, args.num_gpus, args.gpu_lock_dir)
    if mode == ddp.SPAWN:
        if resolve_device(args.device).type == "cuda":  # one line here, before any rank starts
            from nnunet_core.training.gpu_ordinals import check_visible

            check_visible(args.num_gpus, f"-num_gpus {args.num_gpus}")
        return ddp.spawn(args.num_gpus, run_in_group, args)
    if mode == ddp.EXTERNAL:
        return run_in_group(args)
    return None


def run_in_group(args: argparse.Namespace) -> int:
    """One rank: join the process group (env://), train, leave the group."""
    from nnunet_core.training.distributed import process_group

    with process_group(resolve_device(args.device)) as (topology, device):
        args._topology, args._device = topology, device
        return run(args)


def run(args: argparse.Namespace) -> int:
    """Check the flags, launch DDP if asked, then hand this process's fold to ``run_fold``."""
    from nnunet_core.cluster import stop_signal, user_stop

    # First, before torch loads (seconds on a busy node): the workflow's shell passes the signal
    # on ignored, so one that came before this line would be lost. A DDP launcher replaces this
    # handler with forwarding (``launch``).
    stop_signal.for_trainer()
    user_stop.for_trainer()  # in a workflow's job, Ctrl-C stops after the epoch (exit 130)
    check_flags(args)
    if getattr(args, "_topology", None) is None:  # once, before any DDP rank starts
        tracking_choice(args)  # a back-end without its package: one line, before torch loads
        from nnunet_core.extension.trainer_syntax import check_trainer_source
        from nnunet_core.training.trainer.lookup import check_trainer_name, resolve_trainer

        code = check_trainer_name(args.trainer)
        if code is not None:  # class and Trainer base read from the file, before its code runs
            check_trainer_source(code)
        resolve_trainer(args.trainer)  # a user's trainer that fails to import: one line here
    launched = launch(args)
    if launched is not None:
        return user_stop.exit_status(launched)
    from nnunet_core.training.fold.failures import classified
    from nnunet_core.training.fold.run import run_fold

    with classified(args.trainer):  # a user's hook that raised: exit 3; out of memory: 76
        return user_stop.exit_status(run_fold(fold_request(args)))


def fold_request(args: argparse.Namespace) -> FoldRequest:
    """The parsed command line as the lifecycle's request (topology: the launcher's, if any)."""
    from nnunet_core.cluster.process_topology import SINGLE_PROCESS
    from nnunet_core.training.fold.run import FoldFlags, FoldRequest

    topology = getattr(args, "_topology", None) or SINGLE_PROCESS
    roots = roots_from_args(args)
    flags = FoldFlags(
        resume=args.c,
        validate_only=args.val,
        val_best=args.val_best,
        npz=args.npz,
        pretrained_weights=args.pretrained_weights,
        deterministic=args.deterministic,
        deadline=args.deadline,
        stop_margin=args.stop_margin,
    )
    return FoldRequest(
        roots=roots,
        dataset=resolve_dataset_name(args.dataset, roots),
        configuration=args.configuration,
        fold=parse_fold(args.fold),
        plans=args.plans,
        settings=settings_from_args(args, topology.is_main),
        device=getattr(args, "_device", None) or resolve_device(args.device),
        flags=flags,
        topology=topology,
        arguments={k: v for k, v in vars(args).items() if not k.startswith("_")},
        tracking=tracking_choice(args),
    )
