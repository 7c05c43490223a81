"""The lines a training log starts with: what trains where, on how much data, for how long."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nnunet_core.model import count_parameters
from nnunet_core.training.distributed import gather_descriptions

if TYPE_CHECKING:
    from nnunet_core.training.trainer.loop import Trainer


def log_start(self: Trainer) -> None:
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
