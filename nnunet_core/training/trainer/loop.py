"""The training loop of one fold: epochs of training and validation iterations, nothing else.

Each concern lives elsewhere: batches come from ``data.patch_loader`` + ``data.workers`` (a batch is
a pure function of seed, fold, epoch and iteration), the optimisation recipe from ``optimizer``, the
loss from ``loss``, files from ``checkpoint`` and ``progress``. This module wires them together,
decides when to write which checkpoint, and knows how to save and restore its own state.

Checkpoints: ``checkpoint_best.pth`` whenever the EMA pseudo Dice improves strictly,
``checkpoint_latest.pth`` every ``save_every`` epochs (and on a requested stop),
``checkpoint_final.pth`` at the end. ``checkpoint_latest`` is removed only by the fold's
lifecycle (``fold.run.clean_up_finished``), once the final validation has finished.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nnunet_core.cluster.process_topology import SINGLE_PROCESS, Topology
from nnunet_core.extension.trainer_code import trainer_class_name
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.results import PROGRESS_PNG
from nnunet_core.model import build_network as nnunet_network
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.runtime.cpus import default_num_workers
from nnunet_core.tracking import NO_TRACKER, Tracker, epoch_metrics
from nnunet_core.training.augmentation import TrainingTransforms, configure_augmentation
from nnunet_core.training.data.fold_loaders import SlowBatches, fold_loaders
from nnunet_core.training.data.patch_loader import PatchLoader
from nnunet_core.training.data.pinning import Batches, pinned_on
from nnunet_core.training.data.workers import BatchStream
from nnunet_core.training.deep_supervision import deep_supervision_scales
from nnunet_core.training.distributed import (
    all_reduce_sum,
    split_batch,
    sum_over_ranks,
)
from nnunet_core.training.fold.setup import FoldSetup
from nnunet_core.training.loss import build_loss as nnunet_loss
from nnunet_core.training.optimizer import (
    autocast,
    build_grad_scaler,
    maybe_compile,
    optimizer_step,
    set_epoch_lr,
    unwrap,
)
from nnunet_core.training.optimizer import build_optimizer as nnunet_optimizer
from nnunet_core.training.trainer.epoch_timing import EpochTimer, EpochTiming
from nnunet_core.training.trainer.log import log_start
from nnunet_core.training.trainer.progress import (
    EpochEta,
    ProgressHistory,
    TrainingLog,
    global_dice,
    log_epoch_end,
    nanmean,
    pseudo_dice_counts,
)
from nnunet_core.training.trainer.progress_plot import ProgressPlot
from nnunet_core.training.trainer.settings import TrainerSettings
from nnunet_core.training.trainer.variants import DEFAULT_EPOCHS, TrainerVariant, parse_trainer_name

FINISHED = "finished"
STOPPED = "stopped"
StopCheck = Callable[[int], bool]  # called with the epoch just finished; True stops there
# a sample's training transform: (data, seg, numpy rng) -> (data, seg)
Transform = Callable[[Any, Any, np.random.Generator], tuple[Any, Any]]
__all__ = ["FINISHED", "STOPPED", "Trainer", "TrainerSettings"]


class Trainer:
    """One fold's network, optimizer, loss and progress, and the loop that trains them.

    The public base class of users' trainers (``from nnunet_core import Trainer``). Its hooks,
    each overridable alone (docs/bring-your-own-method.md): ``build_network``, ``build_loss``,
    ``training_transform``, ``build_optimizer``, ``set_learning_rate``, ``adjust_schedule``,
    ``configure_variant`` (or just ``deep_supervision = False`` for a network without it).
    """

    deep_supervision: bool | None = None  # None: the trainer name's variant decides (on)
    tracker: Tracker = NO_TRACKER  # the fold's experiment tracker (training.fold.tracking)

    def __init__(
        self,
        setup: FoldSetup,
        settings: TrainerSettings,
        device: torch.device,
        topology: Topology = SINGLE_PROCESS,
    ) -> None:
        settings = self.adjust_schedule(settings)
        settings.check()
        self.setup = setup
        self.settings = settings
        self.device = device
        self.topology = topology
        config = setup.configuration
        self.patch_size = list(config.patch_size)
        self.batch_size = config.batch_size  # global: split over the ranks
        self.rank_batch = split_batch(self.batch_size, topology.world_size, topology.global_rank)
        self.variant = self.configure_variant()  # what the -tr name changes
        self.augmentation = configure_augmentation(self.patch_size, self.variant.dummy_2d)
        # the variant's axes (None: no mirroring) serve augmentation, validation and predict
        self.mirror_axes = self.variant.mirror_axes(len(self.patch_size))
        strides = config.strides
        ds = self.variant.deep_supervision  # False: nnUNetTrainerNoDeepSupervision
        self.ds_scales = deep_supervision_scales(strides) if ds else None
        torch.manual_seed(settings.seed)  # the same initial weights for the same seed
        self.network = self.build_network(
            config, setup.num_input_channels, setup.label_spec.num_segmentation_heads, ds
        ).to(device)
        self.model = maybe_compile(self.network, device, settings.compile)
        if topology.distributed:  # compile first, then DDP (optimizer holds the plain params)
            self.model = torch.nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[device.index] if device.type == "cuda" else None,
                find_unused_parameters=not ds,  # without deep supervision the low heads idle
            )
        self.optimizer = self.build_optimizer()
        self.grad_scaler = build_grad_scaler(device)
        self.loss = self.build_loss()
        # a rank's loss times this, summed over ranks, is the loss of the global batch
        self.loss_share = self.rank_batch.size / self.batch_size
        self.history = ProgressHistory()
        self.progress_plot = ProgressPlot(setup.output_folder / PROGRESS_PNG, settings.is_main)
        self.log = TrainingLog(setup.output_folder, enabled=settings.is_main)
        self.eta = EpochEta(settings.num_epochs, on_cpu=device.type == "cpu")  # this attempt
        self.current_epoch = 0
        self.best_ema: float | None = None
        regions = setup.label_spec.foreground_regions if setup.label_spec.has_regions else None
        self._regions = regions

    # ----------------------------------------------------------------------- hooks
    def adjust_schedule(self, settings: TrainerSettings) -> TrainerSettings:
        """The schedule (epochs, iterations, ...) from the command line's; a subclass returns
        ``dataclasses.replace(settings, ...)`` and wins over the command line, as upstream's."""
        return settings

    def configure_variant(self) -> TrainerVariant:
        """Mirroring, deep supervision and dummy 2D: the built-in name's, else nnUNetTrainer's."""
        name = self.settings.trainer_name
        if type(self) is Trainer:
            variant = parse_trainer_name(name)
        else:
            variant = TrainerVariant(trainer_class_name(name), DEFAULT_EPOCHS)
        if self.deep_supervision is not None:
            variant = replace(variant, deep_supervision=self.deep_supervision)
        return variant

    @classmethod
    def build_network(
        cls,
        configuration: Configuration,
        num_input_channels: int,
        num_outputs: int,
        deep_supervision: bool,
    ) -> torch.nn.Module:
        """The network from the plans' configuration (a classmethod: ``predict`` calls it to
        rebuild the network without data). With deep supervision it returns one output per
        scale, full resolution first, and ``deep_supervision`` is an attribute to toggle."""
        return nnunet_network(configuration, num_input_channels, num_outputs, deep_supervision)

    def build_loss(self) -> Callable[[Any, Any], torch.Tensor]:
        """``loss(outputs, targets)``: lists of scales with deep supervision, else tensors; the
        targets are label maps (b, 1, *patch). DDP: batch Dice counts summed over ranks; the
        coarsest head keeps a tiny weight so every parameter gets a gradient."""
        distributed = self.topology.distributed
        return nnunet_loss(
            self.setup.configuration,
            self.setup.label_spec,
            deep_supervision=self.variant.deep_supervision,
            reduce_fn=all_reduce_sum if distributed else None,
            last_ds_weight=1e-6 if distributed else 0.0,
        )

    def training_transform(self, ours: TrainingTransforms) -> Transform:
        """A sample's training augmentation; return ``ours`` wrapped (add) or another (replace).
        Runs in the data workers with their own numpy rng (keep it a pure function of it)."""
        return ours

    def build_optimizer(self) -> torch.optim.Optimizer:
        """The optimizer of ``self.network``'s parameters (upstream's SGD by default)."""
        return nnunet_optimizer(self.network, self.settings.optimizer)

    def set_learning_rate(self, epoch: int) -> float:
        """Set the optimizer's learning rate for ``epoch`` (stateless: resuming needs no state)
        and return it for the log; upstream's poly schedule by default."""
        settings = self.settings
        return set_epoch_lr(self.optimizer, epoch, settings.num_epochs, settings.optimizer)

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
            "trainer_name": trainer_class_name(self.settings.trainer_name),  # as upstream's
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
    def _loaders(self) -> tuple[PatchLoader | SlowBatches, PatchLoader]:
        return fold_loaders(
            self.setup,
            self.augmentation,
            self.patch_size,
            self.mirror_axes,
            self.rank_batch,  # this rank's global positions: seeds and forced foreground
            self.settings.seed,
            self.ds_scales,
            self.training_transform,
        )

    @contextmanager
    def _streams(self) -> Iterator[tuple[Batches, Batches]]:
        """Training and validation batch streams from the current epoch on (pinned on CUDA)."""
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
            train, val = (stack.enter_context(pinned_on(self.device, s)) for s in (train, val))
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
        log_start(self)
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
                        self.progress_plot.catch_up(self.history)
                        return STOPPED
        self.save_checkpoint(ckpt.FINAL)
        self.log(f"training finished after {self.current_epoch} epochs")
        return FINISHED

    def run_epoch(self, epoch: int, train_stream: Batches, val_stream: Batches) -> None:
        """One epoch: training iterations, validation iterations, logging and checkpoints."""
        self.history.log("epoch_start_timestamps", time.time(), epoch)
        self.log("")
        self.log(f"Epoch {epoch}")
        lr = self.set_learning_rate(epoch)
        self.history.log("lrs", lr, epoch)
        self.log(f"Current learning rate: {lr:.5f}")
        self.model.train()
        unwrap(self.network).deep_supervision = self.variant.deep_supervision
        timer = EpochTimer(self.device)  # data wait vs compute of the training iterations
        batches = timer.batches(train_stream, self.settings.num_iterations)
        train_losses = [self.train_step(batch) for batch in batches]
        timing = timer.finish()
        self.history.log("train_losses", self._global_mean_loss(train_losses), epoch)
        self.history.log_timing(timing, epoch)
        self.model.eval()
        with torch.no_grad():
            steps = [
                self.validation_step(next(val_stream))
                for _ in range(self.settings.num_val_iterations)
            ]
        self._end_validation(epoch, steps)
        self.history.log("epoch_end_timestamps", time.time(), epoch)
        self._end_epoch(epoch, timing)

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

    def _end_epoch(self, epoch: int, timing: EpochTiming) -> None:
        values = self.history.values
        log_epoch_end(self.log, self.history, self.eta, epoch, timing)
        self.tracker.log_epoch(epoch, epoch_metrics(values))
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
        self.progress_plot.epoch_ended(self.history, last)
