"""A fold's schedule and run options: what the command line set, before a trainer's
``adjust_schedule`` hook changes it (kept apart so that trainer.py holds only the loop)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.fold.settings_table import default_of
from nnunet_core.training.optimizer import OptimizerSettings


@dataclass(frozen=True)
class TrainerSettings:
    """Schedule and run options; the defaults are the settings table's
    (training.fold.settings_table): upstream's, except ``save_every`` (10, not 50)."""

    num_epochs: int = default_of("num_epochs")
    num_iterations: int = default_of("num_iterations")
    num_val_iterations: int = default_of("num_val_iterations")
    save_every: int = default_of("save_every")
    seed: int = default_of("seed")
    num_workers: int | None = default_of("num_workers")  # None: $nnUNet_n_proc_DA or min(CPUs, 12)
    disable_checkpointing: bool = False
    compile: bool | None = None  # None: $nnUNet_compile (only ever on CUDA)
    trainer_name: str = default_of("trainer_name")
    is_main: bool = True  # the process that writes files (rank 0 under DDP)
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)

    def check(self) -> None:
        for name in ("num_epochs", "num_iterations", "num_val_iterations", "save_every"):
            if getattr(self, name) < 1:
                msg = f"{name} must be >= 1, got {getattr(self, name)}"
                raise ConfigurationError(msg)
