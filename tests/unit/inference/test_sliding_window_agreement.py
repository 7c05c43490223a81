"""The sliding window as the final validation and ``predict`` now run it (tiles in batches of the
plan's batch size, float32 sums accumulated in place) agrees with the arithmetic it replaced:
one tile per forward pass, each tile's weighted logits formed, then added."""

from __future__ import annotations

import torch

from nnunet_core.inference.sliding_window import (
    gaussian_importance_map,
    pad_to_patch,
    sliding_window_logits,
    tile_slicers,
)

MIN_AGREEMENT = 0.999


def _reference(net: torch.nn.Module, data: torch.Tensor, patch, classes: int) -> torch.Tensor:
    """One tile at a time; ``sums += logits * gaussian`` (a temporary per tile)."""
    padded, revert = pad_to_patch(data, patch)
    gaussian = gaussian_importance_map(patch)
    sums = torch.zeros((classes, *padded.shape[1:]))
    weights = torch.zeros(padded.shape[1:])
    with torch.no_grad():
        for tile in tile_slicers(padded.shape[1:], patch, 0.5):
            logits = net(padded[(slice(None), *tile)][None])[0]
            sums[(slice(None), *tile)] += logits * gaussian
            weights[tile] += gaussian
    return (sums / weights)[(slice(None), *revert[1:])]


def test_batched_in_place_sliding_window_agrees_with_the_one_tile_arithmetic() -> None:
    torch.manual_seed(0)
    # conv, instance norm, leaky ReLU: the building blocks of the planned U-Net (the norm is
    # per tile, so a batch must not mix tiles)
    net = torch.nn.Sequential(
        torch.nn.Conv3d(1, 8, 3, padding=1),
        torch.nn.InstanceNorm3d(8, affine=True),
        torch.nn.LeakyReLU(0.01),
        torch.nn.Conv3d(8, 3, 3, padding=1),
    ).eval()
    data = torch.randn((1, 21, 37, 30), generator=torch.Generator().manual_seed(1))
    patch = (8, 16, 16)
    expected = _reference(net, data, patch, 3)
    for batch_tiles in (1, 2, 8):
        logits = sliding_window_logits(net, data, patch, 3, batch_tiles=batch_tiles)
        torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
        agreement = (logits.argmax(0) == expected.argmax(0)).float().mean().item()
        assert agreement >= MIN_AGREEMENT, (batch_tiles, agreement)
