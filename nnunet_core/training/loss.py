"""Training losses: soft Dice + cross-entropy (labels) or + BCE (regions), and deep supervision.

Targets are label maps ``(B, 1, *spatial)`` (or ``(B, *spatial)``) for both variants; the region
loss builds its region one-hot itself, so the data pipeline and deep supervision only ever
handle label maps. Voxels carrying the ignore label are removed from every term.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.dataset_json import LabelSpec
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.training.deep_supervision import deep_supervision_scales, deep_supervision_weights

ReduceFn = Callable[[torch.Tensor], torch.Tensor]
SMOOTH = 1e-5


def soft_dice_loss(
    probs: torch.Tensor,
    target: torch.Tensor,
    *,
    batch_dice: bool,
    smooth: float = SMOOTH,
    mask: torch.Tensor | None = None,
    reduce_fn: ReduceFn | None = None,
) -> torch.Tensor:
    """``-mean(dc)`` over channels (and samples unless ``batch_dice``).

    ``dc = (2 tp + smooth) / max(2 tp + fp + fn + smooth, 1e-8)``. With ``batch_dice`` the counts
    are summed over the batch as well. ``reduce_fn`` receives ``stack((tp, fp, fn))`` after
    that sum and must return the same shape: the hook for summing counts across ranks.
    """
    if mask is not None:
        probs = probs * mask
        target = target * mask
    axes = tuple(range(2, probs.ndim))
    if batch_dice:
        axes = (0, *axes)
    tp = (probs * target).sum(axes)
    fp = probs.sum(axes) - tp
    fn = target.sum(axes) - tp
    if reduce_fn is not None:
        tp, fp, fn = reduce_fn(torch.stack((tp, fp, fn)))
    dc = (2 * tp + smooth) / torch.clamp(2 * tp + fp + fn + smooth, min=1e-8)
    return -dc.mean()


def _label_map(target: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``(B, 1, *spatial)`` int64 labels, accepting a missing channel axis."""
    if target.ndim == logits.ndim - 1:
        target = target[:, None]
    if target.ndim != logits.ndim or target.shape[1] != 1 or target.shape[2:] != logits.shape[2:]:
        msg = f"target shape {tuple(target.shape)} does not fit logits {tuple(logits.shape)}"
        raise ConfigurationError(msg)
    return target.long()


def _annotated(labels: torch.Tensor, ignore_label: int | None) -> torch.Tensor | None:
    """Float mask ``(B, 1, ...)`` of voxels without the ignore label (``None``: all count)."""
    if ignore_label is None:
        return None
    return (labels != ignore_label).float()


def _check_reduce(batch_dice: bool, reduce_fn: ReduceFn | None) -> None:
    if reduce_fn is not None and not batch_dice:
        msg = "reduce_fn sums Dice counts across ranks and needs batch_dice=True"
        raise ConfigurationError(msg)


class DiceCELoss(nn.Module):
    """Softmax soft Dice over foreground classes + cross-entropy (weights 1 and 1 by default)."""

    def __init__(
        self,
        *,
        batch_dice: bool,
        ignore_label: int | None = None,
        smooth: float = SMOOTH,
        weight_ce: float = 1.0,
        weight_dice: float = 1.0,
        reduce_fn: ReduceFn | None = None,
    ) -> None:
        super().__init__()
        _check_reduce(batch_dice, reduce_fn)
        self.batch_dice = batch_dice
        self.ignore_label = ignore_label
        self.smooth = smooth
        self.weight_ce = weight_ce
        self.weight_dice = weight_dice
        self.reduce_fn = reduce_fn

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        labels = _label_map(target, logits)
        mask = _annotated(labels, self.ignore_label)
        dice_labels = labels if mask is None else torch.where(mask.bool(), labels, 0)
        with torch.no_grad():
            onehot = torch.zeros_like(logits).scatter_(1, dice_labels, 1)
        probs = torch.softmax(logits, dim=1)
        dice = soft_dice_loss(
            probs[:, 1:],
            onehot[:, 1:],
            batch_dice=self.batch_dice,
            smooth=self.smooth,
            mask=mask,
            reduce_fn=self.reduce_fn,
        )
        ignore_index = -100 if self.ignore_label is None else self.ignore_label
        ce_map = F.cross_entropy(logits, labels[:, 0], ignore_index=ignore_index, reduction="none")
        # Mean over annotated voxels; 0 (not NaN) for a patch without any annotation.
        count = ce_map.numel() if mask is None else torch.clamp(mask.sum(), min=1.0)
        ce = ce_map.sum() / count
        return self.weight_ce * ce + self.weight_dice * dice


def regions_one_hot(labels: torch.Tensor, regions: Sequence[Sequence[int]]) -> torch.Tensor:
    """``(B, R, ...)`` float: channel ``r`` is 1 where the label is any of region ``r``'s labels."""
    channels = []
    for region in regions:
        member = torch.zeros_like(labels, dtype=torch.bool)
        for value in region:
            member |= labels == int(value)
        channels.append(member)
    return torch.cat(channels, dim=1).float()


class DiceBCELoss(nn.Module):
    """Region training: sigmoid soft Dice over all regions + BCE with logits.

    There is no background channel, so no channel is excluded. With an ignore label the BCE is
    the mean over annotated voxels of every region channel.
    """

    def __init__(
        self,
        regions: Sequence[Sequence[int]],
        *,
        batch_dice: bool,
        ignore_label: int | None = None,
        smooth: float = SMOOTH,
        weight_ce: float = 1.0,
        weight_dice: float = 1.0,
        reduce_fn: ReduceFn | None = None,
    ) -> None:
        super().__init__()
        if not regions:
            msg = f"region loss needs at least one region, got {list(regions)!r}"
            raise ConfigurationError(msg)
        _check_reduce(batch_dice, reduce_fn)
        self.regions = [tuple(int(v) for v in r) for r in regions]
        self.batch_dice = batch_dice
        self.ignore_label = ignore_label
        self.smooth = smooth
        self.weight_ce = weight_ce
        self.weight_dice = weight_dice
        self.reduce_fn = reduce_fn

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if logits.shape[1] != len(self.regions):
            msg = (
                f"logits have {logits.shape[1]} channels but there are {len(self.regions)} regions"
            )
            raise ConfigurationError(msg)
        labels = _label_map(target, logits)
        mask = _annotated(labels, self.ignore_label)
        with torch.no_grad():
            regions = regions_one_hot(labels, self.regions).to(logits.dtype)
        dice = soft_dice_loss(
            torch.sigmoid(logits),
            regions,
            batch_dice=self.batch_dice,
            smooth=self.smooth,
            mask=mask,
            reduce_fn=self.reduce_fn,
        )
        bce_map = F.binary_cross_entropy_with_logits(logits, regions, reduction="none")
        if mask is None:
            bce = bce_map.mean()
        else:
            bce = (bce_map * mask).sum() / torch.clamp(mask.sum() * logits.shape[1], min=1.0)
        return self.weight_ce * bce + self.weight_dice * dice


class DeepSupervisionWrapper(nn.Module):
    """Weighted sum of ``loss(output_i, target_i)``; zero-weight outputs are not evaluated."""

    def __init__(self, loss: nn.Module, weights: Sequence[float]) -> None:
        super().__init__()
        self.loss = loss
        self.weights = [float(w) for w in weights]

    def forward(
        self, outputs: Sequence[torch.Tensor], targets: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        if len(outputs) != len(self.weights) or len(targets) != len(self.weights):
            msg = (
                f"deep supervision has {len(self.weights)} weights but got {len(outputs)} "
                f"outputs and {len(targets)} targets"
            )
            raise ConfigurationError(msg)
        terms = [
            w * self.loss(o, t)
            for w, o, t in zip(self.weights, outputs, targets, strict=True)
            if w != 0
        ]
        return torch.stack(terms).sum()


def build_loss(
    configuration: Configuration,
    labels: LabelSpec,
    deep_supervision: bool = True,
    reduce_fn: ReduceFn | None = None,
    last_ds_weight: float = 0.0,
) -> nn.Module:
    """The loss the trainer uses for ``configuration`` (a resolved plans configuration).

    ``reduce_fn`` is used only with batch Dice (per-sample Dice needs no cross-rank sum);
    ``last_ds_weight`` > 0 keeps the coarsest head in the graph for distributed training.
    """
    if not configuration.has("batch_dice"):
        msg = f"{configuration.where}: lacks 'batch_dice' (plans written by an old planner?)"
        raise ConfigurationError(msg)
    batch_dice = configuration.batch_dice
    options: dict[str, Any] = {
        "batch_dice": batch_dice,
        "ignore_label": labels.ignore_label,
        "reduce_fn": reduce_fn if batch_dice else None,
    }
    if labels.has_regions:
        loss: nn.Module = DiceBCELoss(labels.foreground_regions, **options)
    else:
        loss = DiceCELoss(**options)
    if not deep_supervision:
        return loss
    strides = configuration.strides
    n_outputs = len(deep_supervision_scales(strides))
    return DeepSupervisionWrapper(loss, deep_supervision_weights(n_outputs, last_ds_weight))
