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

from nnunet_core.commands.common import add_root_flags, roots_from_args
from nnunet_core.errors import ConfigurationError
from nnunet_core.paths import (
    DEFAULT_PLANS_NAME,
    DEFAULT_TRAINER,
    parse_fold,
    preprocessed_dataset_dir,
    resolve_dataset_name,
)
from nnunet_core.training.fold_setup import copy_model_files, prepare_fold
from nnunet_core.training.trainer_variants import known_trainer_names, parse_trainer_name

if TYPE_CHECKING:  # torch and the trainer load only when a command runs (the CLI stays fast)
    import torch

    from nnunet_core.training.trainer import Trainer, TrainerSettings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", help="dataset id (900) or name (Dataset900_Synth)")
    parser.add_argument("configuration", help="configuration in the plans, e.g. 3d_fullres")
    parser.add_argument("fold", help="fold 0-4 (or any split index), or 'all'")
    parser.add_argument(
        "-tr",
        dest="trainer",
        default=DEFAULT_TRAINER,
        help=f"trainer: {', '.join(known_trainer_names())}",
    )
    parser.add_argument("-p", dest="plans", default=DEFAULT_PLANS_NAME, help="plans name")
    parser.add_argument("-pretrained_weights", help="checkpoint to initialise the network from")
    parser.add_argument("-num_gpus", type=int, default=1, help="GPUs (processes) for this fold")
    parser.add_argument("--npz", action="store_true", help="save validation probabilities (.npz)")
    parser.add_argument("--c", action="store_true", help="continue from the last checkpoint")
    parser.add_argument("--val", action="store_true", help="only run the final validation")
    parser.add_argument("--val_best", action="store_true", help="validate checkpoint_best")
    parser.add_argument("--disable_checkpointing", action="store_true", help="write no checkpoints")
    parser.add_argument(
        "-device",
        choices=("auto", "cuda", "cpu", "mps"),
        help="auto (default): cuda if torch sees a GPU, else cpu with a warning",
    )
    parser.add_argument(
        "--epochs", type=int, help="epochs (>= 1; default: the trainer's, 1000 for nnUNetTrainer)"
    )
    parser.add_argument("--iterations", type=int, default=250, help="training iterations/epoch")
    parser.add_argument(
        "--val-iterations", type=int, default=50, help="validation iterations/epoch"
    )
    parser.add_argument(
        "--save-every", type=int, default=1, help="epochs between checkpoint_latest"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of sampling and augmentation")
    parser.add_argument("--num-workers", type=int, help="data workers (default $nnUNet_n_proc_DA)")
    parser.add_argument(
        "--gpu-lock-dir",
        help="folder of the GPU slot locks used when CUDA_VISIBLE_DEVICES is unset "
        "(default $nnUNet_gpu_lock_dir, else <tmp>/nnunet_core_gpu_locks)",
    )
    parser.add_argument(
        "--deadline",
        help="stop cleanly (checkpoint_latest, exit 0) when the next epoch would end after this: "
        "seconds from now, HH:MM[:SS] or an ISO date-time (default: the SLURM job's end time)",
    )
    parser.add_argument(
        "--stop-margin",
        type=float,
        default=300.0,
        help="seconds kept free before the deadline (default 300)",
    )
    parser.add_argument(
        "--deterministic", action="store_true", help="torch's deterministic algorithms"
    )
    add_root_flags(parser)


def check_flags(args: argparse.Namespace) -> None:
    """Upstream's forbidden combinations, as one-line errors."""
    if args.c and args.pretrained_weights:
        msg = "--c and -pretrained_weights exclude each other (a continued run has its weights)"
        raise ConfigurationError(msg)
    if args.c and args.val:
        msg = "--c and --val exclude each other (--val only validates a finished training)"
        raise ConfigurationError(msg)
    if args.val_best and args.disable_checkpointing:
        msg = "--val_best needs checkpoint_best.pth, which --disable_checkpointing never writes"
        raise ConfigurationError(msg)
    if args.epochs is not None and args.epochs < 1:
        msg = f"--epochs must be >= 1, got {args.epochs}"
        raise ConfigurationError(msg)
    if args.num_gpus < 1:
        msg = f"-num_gpus must be >= 1, got {args.num_gpus}"
        raise ConfigurationError(msg)


def resolve_device(name: str | None) -> torch.device:
    """``-device``; without it CUDA when available, else the CPU. The GPU comes from
    ``CUDA_VISIBLE_DEVICES``, never from the flag."""
    import torch

    if name in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        msg = "-device cuda but torch sees no CUDA device (use -device cpu)"
        raise ConfigurationError(msg)
    if name == "mps" and not torch.backends.mps.is_available():
        msg = "-device mps but MPS is not available on this machine"
        raise ConfigurationError(msg)
    return torch.device(name)


def settings_from_args(args: argparse.Namespace, is_main: bool = True) -> TrainerSettings:
    from nnunet_core.training.trainer import TrainerSettings

    try:
        variant = parse_trainer_name(args.trainer)
    except ConfigurationError as exc:
        msg = f"-tr {args.trainer}: {exc}"
        raise ConfigurationError(msg) from None
    epochs = variant.num_epochs if args.epochs is None else args.epochs  # 0 fails in check()
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
