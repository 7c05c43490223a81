"""Dice+CE / Dice+BCE losses, ignore label, deep supervision weights, scales and targets."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.dataset_json import parse_labels
from nnunet_core.io.plans import load_plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.model import build_network
from nnunet_core.training.deep_supervision import (
    deep_supervision_scales,
    deep_supervision_weights,
    downsample_targets,
)
from nnunet_core.training.loss import (
    DeepSupervisionWrapper,
    DiceBCELoss,
    DiceCELoss,
    build_loss,
    soft_dice_loss,
)
from tests.helpers.paths import TEST_DATA

PEER_PLANS = TEST_DATA / "plans" / "synth3d_peer900" / "nnUNetPlans.json"


def _labels(seed: int = 0, shape: tuple[int, ...] = (2, 1, 6, 6), n: int = 3) -> torch.Tensor:
    return torch.randint(0, n, shape, generator=torch.Generator().manual_seed(seed))


def _logits_for(labels: torch.Tensor, n: int, scale: float) -> torch.Tensor:
    """Logits that put ``scale`` on the given labels (large scale: confident prediction)."""
    onehot = torch.zeros((labels.shape[0], n, *labels.shape[2:])).scatter_(1, labels, 1)
    return scale * (2 * onehot - 1)


def _reference_dice(probs: torch.Tensor, onehot: torch.Tensor, channels: slice) -> float:
    tp = (probs * onehot)[:, channels].sum((2, 3))
    denominator = (probs + onehot)[:, channels].sum((2, 3))
    return -((2 * tp + 1e-5) / (denominator + 1e-5)).mean().item()


def test_perfect_prediction_is_near_minimum_and_wrong_one_is_worse() -> None:
    labels = _labels()
    loss = DiceCELoss(batch_dice=False)
    perfect = loss(_logits_for(labels, 3, 20.0), labels).item()
    wrong = loss(_logits_for((labels + 1) % 3, 3, 20.0), labels).item()
    assert perfect == pytest.approx(-1.0, abs=1e-4)  # Dice -1, CE ~0
    assert wrong > perfect + 1.0


def test_dice_term_excludes_background() -> None:
    labels = _labels(1)
    logits = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(2))
    probs = torch.softmax(logits, 1)
    onehot = torch.zeros_like(probs).scatter_(1, labels, 1)
    dice_only = DiceCELoss(batch_dice=False, weight_ce=0.0)(logits, labels).item()
    assert dice_only == pytest.approx(_reference_dice(probs, onehot, slice(1, None)), abs=1e-6)
    assert abs(dice_only - _reference_dice(probs, onehot, slice(0, None))) > 1e-3


def test_batch_dice_differs_from_per_sample_dice() -> None:
    labels = torch.zeros(2, 1, 4, 4, dtype=torch.long)
    labels[0, 0, :2] = 1  # sample 1 has foreground, sample 2 none
    logits = _logits_for(labels, 2, 20.0)
    logits[1, :, 0, 0] = torch.tensor([-20.0, 20.0])  # one false-positive voxel in sample 2
    per_sample = DiceCELoss(batch_dice=False, weight_ce=0.0)(logits, labels).item()
    batch = DiceCELoss(batch_dice=True, weight_ce=0.0)(logits, labels).item()
    assert per_sample == pytest.approx(-0.5, abs=1e-3)  # sample 2's Dice collapses to ~0
    assert batch == pytest.approx(-16 / 17, abs=1e-3)  # 2*8 / (2*8 + 1 fp)


def test_ignore_label_voxels_do_not_affect_loss_or_gradient() -> None:
    labels = _labels(3)
    labels[:, :, :2] = 3  # ignore label = max label + 1
    ignored = (labels == 3).expand(-1, 3, -1, -1)
    base = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(4))
    changed = base.clone()
    changed[ignored] = (
        torch.randn(int(ignored.sum()), generator=torch.Generator().manual_seed(5)) * 10
    )
    loss = DiceCELoss(batch_dice=True, ignore_label=3)
    logits = base.clone().requires_grad_(True)
    value = loss(logits, labels)
    value.backward()
    assert loss(changed, labels).item() == pytest.approx(value.item(), abs=1e-6)
    assert torch.count_nonzero(logits.grad[ignored]) == 0
    assert torch.count_nonzero(logits.grad[~ignored]) > 0


def test_fully_ignored_patch_gives_finite_loss() -> None:
    labels = torch.full((1, 1, 4, 4), 3)
    value = DiceCELoss(batch_dice=True, ignore_label=3)(torch.randn(1, 3, 4, 4), labels)
    assert torch.isfinite(value)


def test_region_loss_decreases_toward_perfect() -> None:
    labels = _labels(6)
    regions = [(1, 2), (2,)]
    target = torch.cat([(labels >= 1), (labels == 2)], dim=1).float()
    loss = DiceBCELoss(regions, batch_dice=True)
    values = [loss(scale * (2 * target - 1), labels).item() for scale in (0.0, 1.0, 3.0, 10.0)]
    assert values == sorted(values, reverse=True) and values[0] > values[-1] + 0.5
    assert values[-1] == pytest.approx(-1.0, abs=1e-3)


def test_region_loss_with_ignore_label_masks_voxels() -> None:
    labels = _labels(7)
    labels[:, :, -1] = 3
    loss = DiceBCELoss([(1, 2), (2,)], batch_dice=False, ignore_label=3)
    logits = torch.randn(2, 2, 6, 6, requires_grad=True)
    loss(logits, labels).backward()
    assert torch.count_nonzero(logits.grad[:, :, -1]) == 0
    assert torch.count_nonzero(logits.grad[:, :, :-1]) > 0


def test_reduce_fn_sees_counts_before_dice() -> None:
    seen = []

    def double(stats: torch.Tensor) -> torch.Tensor:
        seen.append(tuple(stats.shape))
        return stats * 2

    probs = torch.rand(2, 2, 4, 4)
    target = (torch.rand(2, 2, 4, 4) > 0.5).float()
    plain = soft_dice_loss(probs, target, batch_dice=True, smooth=0.0)
    doubled = soft_dice_loss(probs, target, batch_dice=True, smooth=0.0, reduce_fn=double)
    assert seen == [(3, 2)]
    torch.testing.assert_close(plain, doubled)  # scale-free without smoothing
    with pytest.raises(ConfigurationError, match="batch_dice"):
        DiceCELoss(batch_dice=False, reduce_fn=double)


def test_deep_supervision_weights() -> None:
    assert deep_supervision_weights(4) == pytest.approx([4 / 7, 2 / 7, 1 / 7, 0.0])
    assert deep_supervision_weights(4)[:3] == pytest.approx([0.5714286, 0.2857143, 0.1428571])
    assert deep_supervision_weights(5) == pytest.approx([8 / 15, 4 / 15, 2 / 15, 1 / 15, 0.0])
    assert deep_supervision_weights(3, last_weight=1e-6)[-1] > 0


def test_deep_supervision_scales_from_plans_strides() -> None:
    strides = [[1, 1, 1], [1, 2, 2], [2, 2, 2], [2, 2, 2], [2, 1, 2]]
    assert deep_supervision_scales(strides) == [
        [1.0, 1.0, 1.0],
        [1.0, 0.5, 0.5],
        [0.5, 0.25, 0.25],
        [0.25, 0.125, 0.125],
    ]


def test_downsample_targets_nearest() -> None:
    seg = torch.arange(64, dtype=torch.int16).reshape(1, 1, 8, 8)
    full, half, quarter = downsample_targets(seg, [[1, 1], [0.5, 0.5], [0.25, 0.5]])
    assert full is seg
    assert half.dtype == torch.int16 and tuple(half.shape) == (1, 1, 4, 4)
    torch.testing.assert_close(half, seg[:, :, 1::2, 1::2])  # nearest-exact picks centres
    assert tuple(quarter.shape) == (1, 1, 2, 4)
    assert set(quarter.unique().tolist()) <= set(seg.unique().tolist())
    assert tuple(downsample_targets(seg[0], [[0.5, 0.5]])[0].shape) == (1, 4, 4)


@pytest.mark.parametrize(
    "shape,scale",
    [
        ((16, 32, 24), [0.5, 0.5, 0.5]),
        ((16, 32, 24), [0.25, 0.125, 0.125]),
        ((9, 12, 15), [1 / 3, 1 / 3, 0.2]),  # odd factors
        ((10, 12, 14), [0.5, 0.25, 0.5]),  # 12 * 0.25: whole, 14 * 0.5: whole
        ((10, 11, 14), [0.5, 0.5, 0.5]),  # 11 * 0.5 rounds: interpolated as upstream
    ],
)
def test_downsampled_targets_equal_upstream_nearest_exact(shape, scale) -> None:
    """Whole factors take a strided slice instead of interpolating: the same voxels as
    upstream's nearest-exact interpolation, on any labels (-1 padding included)."""
    seg = torch.randint(-1, 5, (2, 1, *shape), dtype=torch.int16)
    size = [round(n * s) for n, s in zip(shape, scale, strict=True)]
    expected = F.interpolate(seg.float(), size=size, mode="nearest-exact").to(torch.int16)
    (small,) = downsample_targets(seg, [scale])
    assert small.dtype == torch.int16 and small.is_contiguous()
    assert torch.equal(small, expected)


def test_wrapper_skips_zero_weights_and_checks_counts() -> None:
    calls = []

    def fake(o: torch.Tensor, _t: torch.Tensor) -> torch.Tensor:
        calls.append(o.shape[-1])
        return o.sum()

    wrapper = DeepSupervisionWrapper(fake, [0.75, 0.25, 0.0])
    outputs = [torch.ones(1, 1, 4), torch.ones(1, 1, 2), torch.ones(1, 1, 1)]
    assert wrapper(outputs, outputs).item() == pytest.approx(0.75 * 4 + 0.25 * 2)
    assert calls == [4, 2]
    with pytest.raises(ConfigurationError, match="3 weights"):
        wrapper(outputs[:2], outputs[:2])


def test_sgd_steps_lower_the_loss_of_a_tiny_net() -> None:
    torch.manual_seed(0)
    raw = load_plans(PEER_PLANS).configuration("2d").raw
    raw["architecture"]["arch_kwargs"]["features_per_stage"] = [4, 8, 8, 8]
    config = Configuration("2d", raw)
    net = build_network(config, 1, 3)
    loss_fn = build_loss(config, parse_labels({"labels": {"background": 0, "a": 1, "b": 2}}))
    scales = deep_supervision_scales(config.strides)
    x = torch.randn(2, 1, 16, 16)
    seg = (x > 0.5).long() + (x > 1.2).long()  # learnable from the intensities
    targets = downsample_targets(seg, scales)
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.99, nesterov=True)
    values = []
    for _ in range(15):
        optimizer.zero_grad()
        value = loss_fn(net(x), targets)
        value.backward()
        optimizer.step()
        values.append(value.item())
    assert values[-1] < values[0] - 0.1


def test_build_loss_picks_region_loss_and_plain_loss() -> None:
    config = load_plans(PEER_PLANS).configuration("3d_fullres")
    regions = parse_labels(
        {"labels": {"background": 0, "whole": [1, 2], "core": 2}, "regions_class_order": [1, 2]}
    )
    assert isinstance(build_loss(config, regions, deep_supervision=False), DiceBCELoss)
    wrapped = build_loss(config, parse_labels({"labels": {"background": 0, "a": 1}}))
    assert isinstance(wrapped, DeepSupervisionWrapper) and isinstance(wrapped.loss, DiceCELoss)
    assert wrapped.weights == pytest.approx([4 / 7, 2 / 7, 1 / 7, 0.0])
    assert wrapped.loss.batch_dice is False  # 3d_fullres of this plan
