"""A trainer whose steps take a set time, mostly asleep (named by path in the SLURM stop and
resume tests, through the public trainer API).

Those tests need epochs of a known least length, so that a signal lands while a fold trains
and a walltime stops it mid-schedule; they do not need the compute. nnU-Net's loss, network
and data are unchanged; each training and validation step first sleeps ``PACE_SECONDS``.
"""

from __future__ import annotations

import time

from nnunet_core import Trainer

PACE_SECONDS = 0.5


class PacedTrainer(Trainer):
    def build_loss(self):
        loss = super().build_loss()

        def paced_loss(outputs, targets):
            time.sleep(PACE_SECONDS)
            return loss(outputs, targets)

        return paced_loss
