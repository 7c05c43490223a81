"""A trainer whose loss is soft Dice + focal loss instead of nnU-Net's Dice + cross-entropy.

Name it as ``/path/to/focal_dice_trainer.py:FocalDiceTrainer`` (``-tr`` or ``training.trainer``).
Only ``build_loss`` is overridden: network, augmentation and schedule stay nnU-Net's. The file
imports nothing but torch and nnunet_core, so a model trained with it can be shared as a zip.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nnunet_core import Trainer


def focal_dice(logits: torch.Tensor, labels: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    """Soft Dice over the foreground classes + focal loss; ``labels`` is (b, 1, *spatial)."""
    target = labels[:, 0].long()
    log_p = F.log_softmax(logits.float(), dim=1)
    log_pt = log_p.gather(1, target[:, None])[:, 0]
    focal = (-((1 - log_pt.exp()) ** gamma) * log_pt).mean()
    probs = log_p.exp()
    one_hot = F.one_hot(target, logits.shape[1]).movedim(-1, 1).float()
    axes = tuple(range(2, logits.ndim))
    intersection = (probs * one_hot).sum(axes)
    dice = (2 * intersection + 1e-5) / (probs.sum(axes) + one_hot.sum(axes) + 1e-5)
    return focal + (1 - dice[:, 1:].mean())


class FocalDiceTrainer(Trainer):
    def build_loss(self):
        def loss(outputs, targets):
            if not isinstance(outputs, (list, tuple)):  # without deep supervision
                return focal_dice(outputs, targets)
            # deep supervision: every scale, weights halving with resolution (as nnU-Net's)
            weights = [0.5**i for i in range(len(outputs))]
            total = sum(
                w * focal_dice(o, t) for w, o, t in zip(weights, outputs, targets, strict=True)
            )
            return total / sum(weights)

        return loss
