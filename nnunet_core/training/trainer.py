"""The training loop of one fold: epochs of training and validation iterations, nothing else.

Each concern lives elsewhere: batches come from ``data_loader`` + ``workers`` (a batch is a pure
function of seed, fold, epoch and iteration), the optimisation recipe from ``optimizer``, the
loss from ``loss``, files from ``checkpoint`` and ``progress``. This module wires them together,
decides when to write which checkpoint, and knows how to save and restore its own state.

Checkpoints: ``checkpoint_best.pth`` whenever the EMA pseudo Dice improves strictly,
``checkpoint_latest.pth`` every ``save_every`` epochs (and on a requested stop),
``checkpoint_final.pth`` at the end. ``checkpoint_latest`` is removed only by the fold's
lifecycle (``fold_run.clean_up_finished``), once the final validation has finished.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nnunet_core.cluster.process_topology import SINGLE_PROCESS, Topology
from nnunet_core.errors import ConfigurationError
from nnunet_core.model import build_network, count_parameters
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.runtime.cpus import default_num_workers
from nnunet_core.training.augmentation import configure_augmentation
from nnunet_core.training.data_loader import PatchLoader
from nnunet_core.training.deep_supervision import deep_supervision_scales
from nnunet_core.training.distributed import (
    all_reduce_sum,
    gather_descriptions,
    split_batch,
    sum_over_ranks,
)
from nnunet_core.training.fold_loaders import fold_loaders
from nnunet_core.training.fold_setup import FoldSetup
from nnunet_core.training.loss import build_loss
from nnunet_core.training.optimizer import (
    OptimizerSettings,
    autocast,
    build_grad_scaler,
    build_optimizer,
    maybe_compile,
    optimizer_step,
    set_epoch_lr,
    unwrap,
)
from nnunet_core.training.progress import (
    EpochEta,
    ProgressHistory,
    TrainingLog,
    global_dice,
    log_epoch_end,
    nanmean,
    plot_progress,
    pseudo_dice_counts,
)
from nnunet_core.training.trainer_variants import parse_trainer_name
from nnunet_core.training.workers import BatchStream

FINISHED = "finished"
STOPPED = "stopped"
StopCheck = Callable[[int], bool]  # called with the epoch just finished; True stops there


@dataclass(frozen=True)
class TrainerSettings:
    """Schedule and run options; defaults are upstream's except ``save_every`` (1, not 50)."""

    num_epochs: int = 1000
    num_iterations: int = 250
    num_val_iterations: int = 50
    save_every: int = 1
    seed: int = 0
    num_workers: int | None = None  # None: $nnUNet_n_proc_DA or min(CPUs, 12)
    disable_checkpointing: bool = False
    compile: bool | None = None  # None: $nnUNet_compile (only ever on CUDA)
    trainer_name: str = "nnUNetTrainer"
    is_main: bool = True  # the process that writes files (rank 0 under DDP)
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)

    def check(self) -> None:
        for name in ("num_epochs", "num_iterations", "num_val_iterations", "save_every"):
            if getattr(self, name) < 1:
                msg = f"{name} must be >= 1, got {getattr(self, name)}"
                raise ConfigurationError(msg)


class Trainer:
    """One fold's network, optimizer, loss and progress, and the loop that trains them."""

    def __init__(
        self,
        setup: FoldSetup,
        settings: TrainerSettings,
        device: torch.device,
        topology: Topology = SINGLE_PROCESS,
    ) -> None:
        settings.check()
        self.setup = setup
        self.settings = settings
        self.device = device
        self.topology = topology
        config = setup.configuration
        self.patch_size = list(config.patch_size)
        self.batch_size = config.batch_size  # global: split over the ranks
        self.rank_batch = split_batch(self.batch_size, topology.world_size, topology.global_rank)
        self.variant = parse_trainer_name(settings.trainer_name)  # what the -tr name changes
        self.augmentation = configure_augmentation(self.patch_size, self.variant.dummy_2d)
        # the variant's axes (None: no mirroring) serve augmentation, validation and predict
        self.mirror_axes = self.variant.mirror_axes(len(self.patch_size))
        strides = config.strides
        ds = self.variant.deep_supervision  # False: nnUNetTrainerNoDeepSupervision
        self.ds_scales = deep_supervision_scales(strides) if ds else None
        torch.manual_seed(settings.seed)  # the same initial weights for the same seed
        self.network = build_network(
            config, setup.num_input_channels, setup.label_spec.num_segmentation_heads, ds
        ).to(device)
        self.model = maybe_compile(self.network, device, settings.compile)
        if topology.distributed:  # compile first, then DDP (optimizer holds the plain params)
            self.model = torch.nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[device.index] if device.type == "cuda" else None,
                find_unused_parameters=not ds,  # without deep supervision the low heads idle
            )
        self.optimizer = build_optimizer(self.network, settings.optimizer)
        self.grad_scaler = build_grad_scaler(device)
        # DDP: batch Dice counts summed over ranks; the coarsest head keeps a tiny weight so every
        # parameter gets a gradient (DDP's reducer requires it)
        self.loss = build_loss(
            config,
            setup.label_spec,
            deep_supervision=ds,
            reduce_fn=all_reduce_sum if topology.distributed else None,
            last_ds_weight=1e-6 if topology.distributed else 0.0,
        )
        # a rank's loss times this, summed over ranks, is the loss of the global batch
        self.loss_share = self.rank_batch.size / self.batch_size
        self.history = ProgressHistory()
        self.log = TrainingLog(setup.output_folder, enabled=settings.is_main)
        self.eta = EpochEta(settings.num_epochs, on_cpu=device.type == "cpu")  # this attempt
        self.current_epoch = 0
        self.best_ema: float | None = None
        regions = setup.label_spec.foreground_regions if setup.label_spec.has_regions else None
        self._regions = regions

    # ----------------------------------------------------------------- state and checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The checkpoint: upstream's keys, plain types and tensors only."""
        return {
            "network_weights": ckpt.network_weights(unwrap(self.network)),
            "optimizer_state": self.optimizer.state_dict(),
            "grad_scaler_state": self.grad_scaler.state_dict() if self.grad_scaler else None,
            "logging": self.history.state_dict(),
            "_best_ema": self.best_ema,
            "current_epoch": self.current_epoch,
            "init_args": {
                "plans": self.setup.plans.raw,
                "configuration": self.setup.configuration_name,
                "fold": self.setup.fold,
                "dataset_json": self.setup.dataset_json,
                "device": str(self.device),
            },
            "trainer_name": self.settings.trainer_name,
            "inference_allowed_mirroring_axes": None
            if self.mirror_axes is None
            else list(self.mirror_axes),
            "settings": asdict(self.settings),
        }

    def load_state_dict(self, state: dict[str, Any], source: str | Path = "checkpoint") -> None:
        """Restore weights, optimizer, grad scaler, progress, best EMA and the epoch (from our
        checkpoints or upstream's: the parameter order, hence the optimizer state, is shared)."""
        ckpt.load_network_weights(unwrap(self.network), state["network_weights"], source)
        self.optimizer.load_state_dict(state["optimizer_state"])
        if self.grad_scaler is not None and state.get("grad_scaler_state"):
            self.grad_scaler.load_state_dict(state["grad_scaler_state"])
        self.current_epoch = int(state["current_epoch"])
        self.history.load_state_dict(state.get("logging", {}))
        self.history.truncate(self.current_epoch)
        self.best_ema = state.get("_best_ema")

    def load_checkpoint(self, path: str | Path) -> None:
        self.load_state_dict(ckpt.load_checkpoint(path, map_location=self.device), path)
        self.log(f"continuing from {path} at epoch {self.current_epoch}")

    def save_checkpoint(self, name: str) -> Path | None:
        """Write ``name`` into the fold folder (main process only, unless disabled)."""
        if self.settings.disable_checkpointing or not self.settings.is_main:
            return None
        return ckpt.save_checkpoint(self.state_dict(), self.setup.output_folder / name)

    # ----------------------------------------------------------------------- data
    def _loaders(self) -> tuple[PatchLoader, PatchLoader]:
        return fold_loaders(
            self.setup,
            self.augmentation,
            self.patch_size,
            self.mirror_axes,
            self.rank_batch,  # this rank's global positions: seeds and forced foreground
            self.settings.seed,
            self.ds_scales,
        )

    @contextmanager
    def _streams(self) -> Iterator[tuple[BatchStream, BatchStream]]:
        """Training and validation batch streams from the current epoch on."""
        workers = self.settings.num_workers
        workers = default_num_workers() if workers is None else workers
        val_workers = max(1, workers // 2) if workers else 0
        train_loader, val_loader = self._loaders()
        with ExitStack() as stack:
            train = stack.enter_context(
                BatchStream(
                    train_loader,
                    workers,
                    iterations_per_epoch=self.settings.num_iterations,
                    start_epoch=self.current_epoch,
                )
            )
            val = stack.enter_context(
                BatchStream(
                    val_loader,
                    val_workers,
                    iterations_per_epoch=self.settings.num_val_iterations,
                    start_epoch=self.current_epoch,
                )
            )
            yield train, val

    def _to_device(self, batch: dict[str, Any]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        data = batch["data"].to(self.device, non_blocking=True)
        target = batch["target"]
        targets = target if isinstance(target, list) else [target]
        return data, [t.to(self.device, non_blocking=True) for t in targets]

    # ----------------------------------------------------------------------- the loop
    def fit(self, should_stop: StopCheck | None = None) -> str:
        """Train from ``current_epoch`` to ``num_epochs``; ``STOPPED`` if asked to stop early.

        ``should_stop(epoch)`` is asked after every epoch (a signal flag or a deadline); a stop
        writes ``checkpoint_latest.pth`` so that ``--c`` continues with the next epoch.
        """
        self._log_start()
        if self.current_epoch >= self.settings.num_epochs:
            self.log(f"training already finished ({self.current_epoch} epochs)")
            if not (self.setup.output_folder / ckpt.FINAL).is_file():
                self.save_checkpoint(ckpt.FINAL)  # resumed from latest/best with fewer --epochs
            return FINISHED
        with self._streams() as (train_stream, val_stream):
            self.eta.restart()
            for epoch in range(self.current_epoch, self.settings.num_epochs):
                self.run_epoch(epoch, train_stream, val_stream)
                if should_stop is not None and should_stop(epoch):
                    if epoch + 1 < self.settings.num_epochs:
                        if self.current_epoch % self.settings.save_every:  # else just saved
                            self.save_checkpoint(ckpt.LATEST)
                        self.log(f"stopped after epoch {epoch}; continue with --c")
                        return STOPPED
        self.save_checkpoint(ckpt.FINAL)
        self.log(f"training finished after {self.current_epoch} epochs")
        return FINISHED

    def run_epoch(self, epoch: int, train_stream: BatchStream, val_stream: BatchStream) -> None:
        """One epoch: training iterations, validation iterations, logging and checkpoints."""
        self.history.log("epoch_start_timestamps", time.time(), epoch)
        self.log("")
        self.log(f"Epoch {epoch}")
        lr = set_epoch_lr(self.optimizer, epoch, self.settings.num_epochs, self.settings.optimizer)
        self.history.log("lrs", lr, epoch)
        self.log(f"Current learning rate: {lr:.5f}")
        self.model.train()
        unwrap(self.network).deep_supervision = self.variant.deep_supervision
        train_losses = [
            self.train_step(next(train_stream)) for _ in range(self.settings.num_iterations)
        ]
        self.history.log("train_losses", self._global_mean_loss(train_losses), epoch)
        self.model.eval()
        with torch.no_grad():
            steps = [
                self.validation_step(next(val_stream))
                for _ in range(self.settings.num_val_iterations)
            ]
        self._end_validation(epoch, steps)
        self.history.log("epoch_end_timestamps", time.time(), epoch)
        self._end_epoch(epoch)

    def _loss_targets(self, targets: list[torch.Tensor]) -> list[torch.Tensor] | torch.Tensor:
        """Every scale's target with deep supervision, else the full-resolution one."""
        return targets if self.variant.deep_supervision else targets[0]

    def train_step(self, batch: dict[str, Any]) -> float:
        data, targets = self._to_device(batch)
        with autocast(self.device):
            loss = self.loss(self.model(data), self._loss_targets(targets))
        optimizer_step(
            loss, self.model, self.optimizer, self.grad_scaler, self.settings.optimizer.grad_clip
        )
        return float(loss.detach().cpu())

    def validation_step(
        self, batch: dict[str, Any]
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """Loss and TP/FP/FN of the full-resolution output (pseudo Dice counts)."""
        data, targets = self._to_device(batch)
        with autocast(self.device):
            outputs = self.model(data)
            loss = self.loss(outputs, self._loss_targets(targets))
        full = outputs[0] if self.variant.deep_supervision else outputs
        tp, fp, fn = pseudo_dice_counts(
            full, targets[0], self._regions, self.setup.label_spec.ignore_label
        )
        return float(loss.cpu()), tp, fp, fn

    def _end_validation(self, epoch: int, steps: list[tuple[float, Any, Any, Any]]) -> None:
        counts = np.stack([np.sum([s[i] for s in steps], axis=0) for i in (1, 2, 3)])
        tp, fp, fn = sum_over_ranks(counts)  # pseudo Dice of the global batches
        dice = global_dice(tp, fp, fn)
        self.history.log("val_losses", self._global_mean_loss([s[0] for s in steps]), epoch)
        self.history.log("dice_per_class_or_region", dice, epoch)
        self.history.log("mean_fg_dice", nanmean(dice), epoch)

    def _global_mean_loss(self, losses: list[float]) -> float:
        """Mean over iterations of the global batch's loss (rank losses weighted by batch share)."""
        total = sum_over_ranks([float(np.sum(losses)) * self.loss_share])
        return float(total[0]) / max(len(losses), 1)

    def _end_epoch(self, epoch: int) -> None:
        values = self.history.values
        log_epoch_end(self.log, self.history, self.eta, epoch)
        self.current_epoch = epoch + 1
        last = epoch == self.settings.num_epochs - 1
        ema = values["ema_fg_dice"][-1]
        new_best = not math.isnan(ema) and (self.best_ema is None or ema > self.best_ema)
        if new_best:  # before checkpoint_latest, so that a resumed run knows this epoch's best
            self.best_ema = float(ema)
        if not last and self.current_epoch % self.settings.save_every == 0:
            self.save_checkpoint(ckpt.LATEST)
        if new_best:
            self.log(f"Yayy! New best EMA pseudo Dice: {ema:.4f}")
            self.save_checkpoint(ckpt.BEST)
        if self.settings.is_main:
            plot_progress(self.history, self.setup.output_folder / "progress.png")

    def _log_start(self) -> None:
        config = self.setup.configuration
        self.log(
            f"{self.settings.trainer_name} {self.setup.configuration_name} fold {self.setup.fold} "
            f"on {self.device}: {len(self.setup.train_keys)} training / "
            f"{len(self.setup.val_keys)} validation cases"
        )
        self.log(
            f"patch {self.patch_size}, batch {self.batch_size}, spacing {list(config.spacing)}, "
            f"{count_parameters(self.network):,} parameters; {self.settings.num_epochs} epochs x "
            f"{self.settings.num_iterations} iterations (+{self.settings.num_val_iterations} val)"
        )
        if self.topology.distributed:  # collective: every rank reports where it runs
            share = self.rank_batch
            mine = (
                f"{self.topology.describe()} on {self.device}: batch {share.size}, forced "
                f"{list(share.forced)}"
            )
            ranks = gather_descriptions(mine)
            if self.rank_batch.size * self.topology.world_size != self.batch_size:
                self.log(
                    f"WARNING: batch {self.batch_size} is not divisible by "
                    f"{self.topology.world_size} ranks"
                )
            for line in ranks:
                self.log(f"DDP {line}")
