"""One fold's lifecycle, from the parsed command line to a finished (or cleanly stopped) folder.

The ``train`` command only parses flags and launches DDP; what happens to ``fold_k/`` from then
on is here, in this order, one short function per step (``run_fold``):

1. a results root that cannot be written (read-only mount, no permission) is a one-line error;
   resolve the fold (plans, split, output folder); ``--val`` without ``checkpoint_final.pth``
   is a one-line error before anything is touched;
2. determinism (``--deterministic``; else cuDNN autotuning on CUDA), then the fold lock (main
   process only, never for ``--val``);
3. the trainer; ``--val``/``--val_best`` only validates ``checkpoint_final`` and returns;
4. model files next to the folds, stale temporaries removed;
5. start weights: ``--c`` continues from the newest checkpoint; ``-pretrained_weights`` when
   there is none (or without ``--c``);
6. a provenance attempt opens; the stop conditions (signal flag, deadline) are armed;
7. fit; a stopped fit (stop signal or deadline) keeps ``checkpoint_latest`` (``--c`` continues
   there), says so in one stderr line and makes the command exit ``stop_signal.EXIT_STOPPED``,
   the status the workflow's ``retries:`` resubmits on; a finished one validates, removes
   ``checkpoint_latest`` and the lock file;
8. the attempt closes with how it ended (finished, stopped, failed, interrupted).

A write the disk refuses on the way (full, over quota, read-only: a checkpoint, the training
log, a validation export) ends the fold with one ``StorageError`` line naming the file (or the
fold folder, where the failed call does not say which file) and how to continue; every
checkpoint write is atomic, so the last good checkpoint is the one ``--c`` continues from.

The command has already made this process the stop signal's trainer (``stop_signal.for_trainer``);
the stop conditions armed here read its flag.
"""

from __future__ import annotations

import errno
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from nnunet_core.cluster.environment import job_end_time
from nnunet_core.cluster.process_topology import SINGLE_PROCESS, Topology
from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.errors import ConfigurationError, StorageError, storage_cause, storage_error
from nnunet_core.extension.trainer_record import write_record
from nnunet_core.io.atomic import unwritable_reason
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.roots import RESULTS_ENV, Roots, preprocessed_dataset_dir
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.tracking import TrackingChoice
from nnunet_core.training.determinism import configure_kernels
from nnunet_core.training.fold import changes as fold_changes
from nnunet_core.training.fold import provenance
from nnunet_core.training.fold.lock import FoldLock
from nnunet_core.training.fold.setup import FoldSetup, copy_model_files, prepare_fold
from nnunet_core.training.fold.tracking import end_tracking, start_tracking
from nnunet_core.training.stop_conditions import StopConditions, parse_deadline
from nnunet_core.training.trainer.lookup import overridden_hooks, resolve_trainer
from nnunet_core.training.trainer.loop import STOPPED, Trainer
from nnunet_core.training.trainer.settings import TrainerSettings

FAILED = "failed"
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class FoldFlags:
    """The switches that change the lifecycle (the schedule is in ``TrainerSettings``)."""

    resume: bool = False  # --c
    validate_only: bool = False  # --val
    val_best: bool = False  # validate checkpoint_best instead of the final weights
    npz: bool = False  # save validation probabilities
    pretrained_weights: str | None = None
    deterministic: bool = False
    deadline: str | None = None  # --deadline; None: the SLURM job's end time, if any
    stop_margin: float = 300.0


@dataclass(frozen=True)
class FoldRequest:
    """What the command resolved: which fold, how to train it, and where this process sits."""

    roots: Roots
    dataset: str  # resolved name, e.g. Dataset900_Synth
    configuration: str
    fold: int | str
    plans: str
    settings: TrainerSettings  # its trainer_name also names the output folder
    device: torch.device
    flags: FoldFlags = field(default_factory=FoldFlags)
    topology: Topology = SINGLE_PROCESS
    arguments: dict[str, Any] = field(default_factory=dict)  # the command line, for provenance
    tracking: TrackingChoice = field(default_factory=TrackingChoice)  # --tracking*: off


def run_fold(request: FoldRequest) -> int:
    """Train (or with ``--val`` only validate) one fold: 0 when finished, ``EXIT_STOPPED`` when
    the fit stopped before its last epoch (every rank returns it; ``--c`` continues)."""
    check_results_writable(request)
    setup = resolve_fold(request)
    configure_kernels(request.flags.deterministic, request.settings.seed, request.device)
    lock = acquire_lock(request, setup.output_folder)
    try:  # a fold whose recorded settings this run invalidates starts over, its folder aside
        lock = fold_changes.start_over_if_changed(request, setup, lock)
        trainer_class, code = resolve_trainer(request.settings.trainer_name)
        trainer = trainer_class(setup, request.settings, request.device, request.topology)
        if request.flags.validate_only:
            validate_final(trainer, request.flags)
            return 0
        prepare_folder(request, setup)
        if code is not None and request.topology.is_main:  # predict rebuilds the network from it
            write_record(setup.output_folder.parent, code, trainer_class)
        start_weights = load_start_weights(trainer, request.flags)
        status = train_and_finish(trainer, request, lock, start_weights)
    except Exception as exc:
        refused = refused_write_error(exc, setup.output_folder, request.flags)
        if refused is None:
            raise
        raise refused from exc
    finally:
        if lock is not None:
            lock.release()  # no-op once a finished fold removed it; else the file stays
    return EXIT_STOPPED if status == STOPPED else 0


# ----------------------------------------------------------------------------- the steps
def check_results_writable(request: FoldRequest) -> None:
    """A results root on a read-only file system (or without write permission) is refused
    before anything runs: one line naming it as it was given (``--results`` or the variable)."""
    results = request.roots.require_results()
    existing = results
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent  # train creates the root: its nearest existing folder counts
    reason = unwritable_reason(existing) if existing.is_dir() else None
    if reason is None:
        return
    given = (
        f"--results {results}" if request.arguments.get("results") else f"{RESULTS_ENV}={results}"
    )
    where = "" if existing == results else f" (it would be created in {existing})"
    msg = f"{given}: {reason}{where}; train writes the fold's checkpoints, log and validation there"
    raise ConfigurationError(msg)


def refused_write_error(
    exc: BaseException, fold_folder: Path, flags: FoldFlags
) -> StorageError | None:
    """A refused write (disk full, quota, read-only) as one line: which file (or at least which
    fold folder) and how to continue; None for any other failure."""
    cause = storage_cause(exc)
    if cause is None:
        return None
    fix = "make it writable" if cause.errno == errno.EROFS else "free space on that disk"
    found = None if flags.validate_only else ckpt.find_resume_checkpoint(fold_folder)
    if found is not None:
        advice = f"{fix}, then continue with --c (from {found.name}, which is intact)"
    else:
        advice = f"{fix}, then run the same command again"
    return storage_error(exc, fold_folder, advice)


def resolve_fold(request: FoldRequest) -> FoldSetup:
    """The fold's setup; ``--val`` of an unfinished fold fails here, before any file is written."""
    setup = prepare_fold(
        request.roots,
        request.dataset,
        request.configuration,
        request.fold,
        request.plans,
        request.settings.trainer_name,
    )
    final = setup.output_folder / ckpt.FINAL
    if request.flags.validate_only and not final.is_file():
        msg = f"{final}: training is not finished yet (no {ckpt.FINAL}); train first or use --c"
        raise ConfigurationError(msg)
    return setup


def takes_lock(topology: Topology, flags: FoldFlags) -> bool:
    """Only the main process (global rank 0) locks a training; ``--val`` never does."""
    return topology.is_main and not flags.validate_only


def acquire_lock(request: FoldRequest, folder: Path) -> FoldLock | None:
    """A second job on this fold fails here (FoldLockedError); the kernel drops it at exit."""
    if not takes_lock(request.topology, request.flags):
        return None
    lock = FoldLock(folder)
    lock.acquire()
    return lock


def validate_final(trainer: Trainer, flags: FoldFlags) -> None:
    """``--val``: the final weights (or ``--val_best``'s) predict the validation cases again."""
    trainer.load_state_dict(
        ckpt.load_checkpoint(trainer.setup.output_folder / ckpt.FINAL, trainer.device)
    )
    write_summary(trainer, validate(trainer, flags))


def prepare_folder(request: FoldRequest, setup: FoldSetup) -> None:
    """Model files for inference next to the folds; temporaries of a killed write removed."""
    if not request.topology.is_main:
        return
    preprocessed = preprocessed_dataset_dir(request.roots, request.dataset)
    copy_model_files(preprocessed, setup.output_folder.parent, request.plans)
    ckpt.remove_stale_temporaries(setup.output_folder)


def load_start_weights(trainer: Trainer, flags: FoldFlags) -> dict[str, Any]:
    """The weights this attempt starts from; returns provenance's ``start_weights`` record.

    ``--c``: the fold's newest checkpoint (final, latest, best); a fold without one starts from
    ``-pretrained_weights`` when given, else fresh. So the workflow passes both to every attempt:
    the first starts from the pretrained file, every retry and rerun from the fold's own
    checkpoint. Without ``--c``: the pretrained weights, else fresh.
    """
    folder = trainer.setup.output_folder
    if flags.resume:
        found = ckpt.find_resume_checkpoint(folder)
        if found is not None:
            trainer.load_checkpoint(found)  # logs "continuing from ... at epoch ..."
            if flags.pretrained_weights:
                trainer.log(
                    f"the fold has its own checkpoint ({found.name}): -pretrained_weights "
                    f"{flags.pretrained_weights} not loaded"
                )
            return provenance.continued_start(found, trainer.current_epoch)
        if not flags.pretrained_weights:
            trainer.log(f"no checkpoint in {folder} to continue from; starting fresh")
            return dict(provenance.FRESH_START)
        trainer.log(
            f"no checkpoint in {folder} to continue from; starting from the pretrained weights"
        )
    elif not flags.pretrained_weights:
        return dict(provenance.FRESH_START)
    skipped = ckpt.load_pretrained_weights(trainer.network, flags.pretrained_weights)
    not_loaded = ", ".join(skipped) or "nothing"
    trainer.log(
        f"loaded pretrained weights from {flags.pretrained_weights}; not loaded "
        f"(upstream's rule: the segmentation heads start fresh): {not_loaded}"
    )
    if not trainer.topology.is_main:  # only rank 0 writes provenance: no checksum to compute
        return {}
    return provenance.pretrained_start(flags.pretrained_weights, skipped)


def train_and_finish(
    trainer: Trainer,
    request: FoldRequest,
    lock: FoldLock | None,
    start_weights: dict[str, Any] | None = None,
) -> str:
    """One provenance attempt (recording ``start_weights``, what ``load_start_weights`` loaded)
    around fit and, when the fit finished, validation and clean-up; the validation summary is
    written last (see ``write_summary``). Returns how the fit ended (``STOPPED`` or not)."""
    path = trainer.setup.output_folder / provenance.PROVENANCE_JSON
    main = request.topology.is_main
    if main:
        provenance.start_attempt(
            path,
            provenance_config(request, trainer),
            trainer.setup.plans,
            request.settings.seed,
            request.device,
            trainer.current_epoch,
            start_weights,
            fold_changes.settings_of_fold(request, trainer.setup),
        )
    status = FAILED
    failing = True  # until the fit (and, once finished, validation) returned
    summary = None
    stop = stop_conditions(request.flags)
    trainer.log(device_line(request.device))
    trainer.log(stop.describe())
    tracker = start_tracking(request, trainer)  # never raises: a failure turns tracking off
    try:
        stop.start()
        status = trainer.fit(should_stop=stop)
        if status == STOPPED:
            report_stop(trainer, request, stop.reason or "request")
        else:
            summary = validate(trainer, request.flags, keep_exported=True)
            clean_up_finished(trainer, lock)
        failing = False
    except KeyboardInterrupt:
        status = INTERRUPTED
        raise
    finally:
        end_tracking(tracker, trainer, summary, status)
        if main:
            try:
                provenance.end_attempt(path, status, trainer.current_epoch)
            except OSError:
                if not failing:  # else the disk that just failed the fit fails this too:
                    raise  # the fit's error is the one to report
    write_summary(trainer, summary)
    return status


def device_line(device: torch.device) -> str:
    """Where this fold computes and with how many torch threads (the job's ``threads``: the
    workflow sets ``OMP_NUM_THREADS``), so a slow CPU fold shows whether it had its cores."""
    return f"device {device}, {torch.get_num_threads()} torch threads"


def validate(
    trainer: Trainer, flags: FoldFlags, keep_exported: bool = False
) -> dict[str, Any] | None:
    """The final validation with the trainer's weights (``--val_best``: checkpoint_best's): every
    rank exports its cases; rank 0 returns the metrics (written by ``write_validation_summary``).
    ``keep_exported``: a retry keeps the cases exported after checkpoint_final (``--val`` redoes
    them all)."""
    from nnunet_core.training.distributed import barrier
    from nnunet_core.training.fold.validation import summarize_validation, validate_fold

    if flags.val_best:
        best = ckpt.load_checkpoint(trainer.setup.output_folder / ckpt.BEST, trainer.device)
        ckpt.load_network_weights(
            trainer.network, best["network_weights"], trainer.setup.output_folder / ckpt.BEST
        )
        trainer.log(f"validating {ckpt.BEST}")
    topology = trainer.topology
    validate_fold(
        trainer.network,
        trainer.setup,
        trainer.device,
        trainer.mirror_axes,
        flags.npz,
        trainer.log,
        rank=topology.global_rank,
        world_size=topology.world_size,
        keep_after=trainer.setup.output_folder / ckpt.FINAL
        if keep_exported and not flags.val_best
        else None,
    )
    if topology.distributed:
        barrier()  # every rank's cases are exported; only rank 0 evaluates them
    return summarize_validation(trainer.setup, trainer.log) if topology.is_main else None


def write_summary(trainer: Trainer, summary: dict[str, Any] | None) -> None:
    """The fold's last file: the workflow counts a fold with ``validation/summary.json`` as done,
    so a kill before it (during clean-up or provenance) leaves the fold to be finished again."""
    from nnunet_core.training.fold.validation import write_validation_summary

    if summary is not None:
        write_validation_summary(trainer.setup, summary)


def clean_up_finished(trainer: Trainer, lock: FoldLock | None) -> None:
    """A finished, validated fold keeps neither checkpoint_latest nor a lock file."""
    if trainer.topology.is_main:
        folder = trainer.setup.output_folder
        remove_file(folder / ckpt.LATEST, inside=[folder])
    if lock is not None:
        lock.release(remove=True)


# ------------------------------------------------------------------- stopping and provenance
def stop_conditions(flags: FoldFlags) -> StopConditions:
    """The stop signal's flag and the deadline (``--deadline``, else the SLURM or LSF job's end
    time)."""
    deadline = parse_deadline(flags.deadline) if flags.deadline else job_end_time()
    return StopConditions(deadline, flags.stop_margin)


def report_stop(trainer: Trainer, request: FoldRequest, reason: str) -> None:
    """The one stderr line (main rank) saying which fold stopped where and why; the command then
    exits ``EXIT_STOPPED``, the status on which the workflow's ``retries:`` starts the next
    attempt, which continues with ``--c``. The training log gets the same line."""
    epoch = trainer.current_epoch - 1
    message = (
        f"{request.dataset} {request.configuration} fold {request.fold}: stopped at epoch "
        f"{epoch} by {reason}; {ckpt.LATEST} holds epoch {trainer.current_epoch}; "
        f"exit {EXIT_STOPPED}: the retry continues with --c"
    )
    trainer.log(message)
    if trainer.settings.is_main:
        print(f"nnunet-core train: {message}", file=sys.stderr, flush=True)


def provenance_config(request: FoldRequest, trainer: Trainer) -> dict[str, Any]:
    """The command's arguments, the settings the trainer ran with (after its schedule hook) and
    the hooks a user's trainer overrides (plain JSON)."""
    config = {"arguments": dict(request.arguments), "trainer": asdict(trainer.settings)}
    if type(trainer) is not Trainer:
        config["trainer_hooks"] = overridden_hooks(type(trainer))
    return config
