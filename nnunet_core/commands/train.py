"""Train one fold: ``nnunet-core train DATASET CONFIGURATION FOLD`` (upstream's nnUNetv2_train).

Results go to ``$nnUNet_results/D/<trainer>__<plans>__<configuration>/fold_<k>/``. With ``--c``
training continues from checkpoint_final, else checkpoint_latest, else checkpoint_best, else it
starts fresh (with a warning). After training the fold's validation cases are predicted into
``validation/`` with ``summary.json``; ``--val`` only redoes that from ``checkpoint_final.pth``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from nnunet_core.commands.common import roots_from_args
from nnunet_core.commands.train_args import (
    check_flags,
    configure_parser,
    settings_from_args,
)
from nnunet_core.devices import resolve_device
from nnunet_core.errors import ConfigurationError
from nnunet_core.paths import parse_fold, preprocessed_dataset_dir, resolve_dataset_name
from nnunet_core.training.fold_setup import copy_model_files, prepare_fold

if TYPE_CHECKING:  # torch and the trainer load only when a command runs (the CLI stays fast)
    from nnunet_core.training.trainer import Trainer, TrainerSettings

__all__ = ["check_flags", "configure_parser", "run", "settings_from_args"]


def _validate(trainer: Trainer, args: argparse.Namespace) -> None:
    from nnunet_core.training import checkpoint as ckpt
    from nnunet_core.training.validation import validate_fold

    if args.val_best:
        best = ckpt.load_checkpoint(trainer.setup.output_folder / ckpt.BEST, trainer.device)
        trainer.network.load_state_dict(ckpt.strip_module_prefix(best["network_weights"]))
        trainer.log("validating checkpoint_best.pth")
    from nnunet_core.training.distributed import barrier
    from nnunet_core.training.validation import summarize_validation

    topology = trainer.topology
    validate_fold(
        trainer.network,
        trainer.setup,
        trainer.device,
        trainer.mirror_axes,
        args.npz,
        trainer.log,
        rank=topology.global_rank,
        world_size=topology.world_size,
    )
    if topology.distributed:
        barrier()  # every rank's cases are exported; only rank 0 evaluates them
        if topology.is_main:
            summarize_validation(trainer.setup, trainer.log)


def launch(args: argparse.Namespace) -> int | None:
    """Start the DDP workers or join the launcher's group; None: go on as one plain process.

    The spawned/launched ranks come back into ``run`` with ``args._topology`` set.
    """
    from nnunet_core.training import distributed as ddp

    if getattr(args, "_topology", None) is not None:
        return None
    mode = ddp.launch_mode(args.num_gpus)
    if mode != ddp.EXTERNAL and args.device in (None, "auto", "cuda"):  # before CUDA starts
        from nnunet_core.cluster.gpu_slots import acquire_gpus

        acquire_gpus(args.num_gpus, args.gpu_lock_dir)
    if mode == ddp.SPAWN:
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
    from nnunet_core.training import checkpoint as ckpt
    from nnunet_core.training import provenance, signals
    from nnunet_core.training.trainer import STOPPED, Trainer

    check_flags(args)
    launched = launch(args)
    if launched is not None:
        return launched
    from nnunet_core.training.distributed import SINGLE_PROCESS

    topology = getattr(args, "_topology", None) or SINGLE_PROCESS
    signals.install_stop_handler()  # first: from now on SIGUSR1 only sets the stop flag
    roots = roots_from_args(args)
    name = resolve_dataset_name(args.dataset, roots)
    fold = parse_fold(args.fold)
    device = getattr(args, "_device", None) or resolve_device(args.device)
    setup = prepare_fold(roots, name, args.configuration, fold, args.plans, args.trainer)
    folder = setup.output_folder
    final = folder / ckpt.FINAL
    if args.val and not final.is_file():
        msg = f"{final}: training is not finished yet (no checkpoint_final.pth); train first or use --c"
        raise ConfigurationError(msg)
    if args.deterministic:
        from nnunet_core.training.determinism import enable_determinism

        enable_determinism(args.seed)
    lock = None
    if not args.val and os.environ.get("RANK", "0") == "0":
        from nnunet_core.training.fold_lock import FoldLock

        lock = FoldLock(folder)
        lock.acquire()  # a second job on this fold fails here; released when the process ends
    trainer = Trainer(setup, settings_from_args(args, topology.is_main), device, topology)
    if args.val:
        trainer.load_state_dict(ckpt.load_checkpoint(final, device))
        _validate(trainer, args)
        return 0
    if topology.is_main:
        copy_model_files(preprocessed_dataset_dir(roots, name), folder.parent, args.plans)
        ckpt.remove_stale_temporaries(folder)
    if args.c:
        found = ckpt.find_resume_checkpoint(folder)
        if found is not None:
            trainer.load_checkpoint(found)
        else:
            trainer.log(f"no checkpoint in {folder} to continue from; starting fresh")
    elif args.pretrained_weights:
        skipped = ckpt.load_pretrained_weights(trainer.network, args.pretrained_weights)
        trainer.log(
            f"loaded pretrained weights from {args.pretrained_weights}; not loaded: {skipped or 'nothing'}"
        )
    record = provenance_config(args, trainer.settings)
    path = folder / provenance.PROVENANCE_JSON
    if topology.is_main:
        provenance.start_attempt(
            path, record, setup.plans, args.seed, device, trainer.current_epoch
        )
    status = "failed"
    stop = stop_conditions(args)
    trainer.log(stop.describe())
    try:
        stop.start()
        status = trainer.fit(should_stop=stop)
        if status == STOPPED:
            report_stop(trainer, stop.reason or "request")
        else:
            _validate(trainer, args)
            trainer.remove_latest()
            if lock is not None:
                lock.release(remove=True)  # a finished fold keeps no lock file
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if topology.is_main:
            provenance.end_attempt(path, status, trainer.current_epoch)
    return 0


def stop_conditions(args: argparse.Namespace):
    """Flag (SIGUSR1, handler installed by ``run``) and deadline (``--deadline``, else the
    SLURM job's end time)."""
    from nnunet_core.training import signals

    if args.deadline:
        deadline = signals.parse_deadline(args.deadline)
    else:
        deadline = signals.slurm_end_time()
    return signals.StopConditions(deadline, args.stop_margin)


def report_stop(trainer: Trainer, reason: str) -> None:
    """The line the workflow shows when a stopped job fails over to its retry."""
    epoch = trainer.current_epoch - 1
    message = (
        f"stopped at epoch {epoch} by {reason}; checkpoint_latest.pth holds epoch "
        f"{trainer.current_epoch}; will continue on retry (--c)"
    )
    trainer.log(message)
    if not trainer.settings.is_main:
        return
    print(f"nnunet-core train: {message}", flush=True)


def provenance_config(args: argparse.Namespace, settings: TrainerSettings) -> dict[str, Any]:
    """The command's arguments and the resolved settings (plain JSON)."""
    arguments = {k: v for k, v in vars(args).items() if not k.startswith("_")}
    return {"arguments": arguments, "trainer": asdict(settings)}
