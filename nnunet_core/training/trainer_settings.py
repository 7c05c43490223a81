"""A fold's schedule and run options: what the command line set, before a trainer's
``adjust_schedule`` hook changes it (kept apart so that trainer.py holds only the loop)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.optimizer import OptimizerSettings


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
