"""A trainer with another schedule: a quarter of the epochs with twice the iterations each, a
linear warm-up, then a cosine learning rate; and one more augmentation after nnU-Net's.

Name it as ``/path/to/short_schedule_trainer.py:ShortScheduleTrainer``. The schedule hook wins
over the command line (``--epochs 8 --iterations 250`` trains 2 epochs of 500 iterations).
"""

from __future__ import annotations

import dataclasses
import math

from nnunet_core import Trainer

WARMUP_EPOCHS = 2


class InvertIntensity:
    """Our augmentation, then (probability 0.1) the image's intensities mirrored about its mean;
    a plain class, so the data workers can use it."""

    def __init__(self, ours):
        self.ours = ours

    def __call__(self, data, seg, rng):
        data, seg = self.ours(data, seg, rng)
        if rng.random() < 0.1:
            data = 2 * data.mean() - data
        return data, seg


class ShortScheduleTrainer(Trainer):
    def adjust_schedule(self, settings):
        return dataclasses.replace(
            settings,
            num_epochs=max(1, settings.num_epochs // 4),
            num_iterations=2 * settings.num_iterations,
        )

    def set_learning_rate(self, epoch):
        initial, epochs = self.settings.optimizer.initial_lr, self.settings.num_epochs
        if epoch < WARMUP_EPOCHS:
            lr = initial * (epoch + 1) / WARMUP_EPOCHS
        else:
            lr = 0.5 * initial * (1 + math.cos(math.pi * epoch / epochs))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def training_transform(self, ours):
        return InvertIntensity(ours)
