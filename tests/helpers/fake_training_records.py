"""What training leaves in a fold folder, faked: a checkpoint's progress (or only a training
log) and ``provenance.json`` with fixed times, for the report's tests (curves, run times)."""

from __future__ import annotations

import json

import torch

from nnunet_core.io.plans import Plans
from nnunet_core.layout.results import DatasetDirs, TrainedModel
from nnunet_core.model.checkpoint import save_checkpoint
from nnunet_core.training.fold import provenance
from nnunet_core.training.trainer.progress import ProgressHistory, TrainingLog

EPOCHS = 4


def history(fold: int) -> ProgressHistory:
    progress = ProgressHistory()
    for epoch in range(EPOCHS):
        progress.log("epoch_start_timestamps", 1000.0 + 10 * epoch, epoch)
        progress.log("lrs", 0.01 * (1 - epoch / EPOCHS), epoch)
        progress.log("train_losses", -0.1 * epoch - 0.01 * fold, epoch)
        progress.log("val_losses", -0.08 * epoch, epoch)
        progress.log("dice_per_class_or_region", [0.5 + 0.1 * epoch, 0.4], epoch)
        progress.log("mean_fg_dice", 0.45 + 0.05 * epoch, epoch)
        progress.log("epoch_end_timestamps", 1008.0 + 10 * epoch, epoch)
    return progress


def write_training_records(dirs: DatasetDirs, config: str, fold: int) -> None:
    """What training leaves in a fold folder: checkpoint (or only a log) and provenance.json."""
    folder = dirs.model_dir(TrainedModel(config)) / f"fold_{fold}"
    if config == "2d" and fold == 4:  # trained with --disable_checkpointing: only the log
        log = TrainingLog(folder, echo=False)
        for epoch in range(2):
            log(f"Epoch {epoch}")
            log(f"Current learning rate: {0.01:.5f}")
            log("train_loss", -0.2 * epoch)
            log("val_loss", -0.1 * epoch)
            log("Pseudo dice", [0.6, float("nan")])
            log("Epoch time: 3.50 s")
    else:
        state = {"network_weights": {}, "logging": history(fold).state_dict(), "current_epoch": 4}
        save_checkpoint(state, folder / "checkpoint_final.pth")
    path = folder / provenance.PROVENANCE_JSON
    for _ in range(2 if fold == 0 else 1):
        provenance.start_attempt(path, {}, Plans({"configurations": {}}), 0, torch.device("cpu"), 0)
        provenance.end_attempt(path, "finished", EPOCHS)
    record = json.loads(path.read_text())
    for i, attempt in enumerate(record["attempts"]):
        attempt["start"] = f"2026-01-01T10:{10 * i + fold:02d}:00+00:00"
        attempt["end"] = f"2026-01-01T10:{10 * i + fold + 3:02d}:30+00:00"
    path.write_text(json.dumps(record))
