"""The planner's VRAM proxy: the summed size of every conv output feature map of a U-Net.

Upstream instantiates the network (dynamic_network_architectures 0.4.4) and calls
``compute_conv_feature_map_size(patch)``. The count is pure arithmetic on the topology, so it is
computed here without torch: planning stays fast and needs no network library. Each term below
mirrors one module of those networks (counted per sample, int64 arithmetic, floor division for
strided sizes). The planning net has no deep supervision, so only the last (full-resolution)
decoder stage adds a segmentation output; the reference traces confirm this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Shape = Sequence[int]


def _strided(size: Shape, stride: Shape) -> list[int]:
    return [int(i) // int(j) for i, j in zip(size, stride, strict=True)]


def _volume(channels: int, size: Shape) -> int:
    return int(channels) * math.prod(int(i) for i in size)


def _stacked_convs(n_convs: int, channels: int, size: Shape, stride: Shape) -> int:
    """A stack of conv-norm-nonlin blocks: the first may be strided, all output ``channels``."""
    return n_convs * _volume(channels, _strided(size, stride))


def _encoder_sizes(patch: Shape, strides: Sequence[Shape]) -> list[list[int]]:
    """Input size of every encoder stage (stage ``s`` sees the patch divided by strides ``< s``)."""
    sizes = [list(patch)]
    for stride in strides[:-1]:
        sizes.append(_strided(sizes[-1], stride))
    return sizes


def _decoder(
    patch: Shape,
    strides: Sequence[Shape],
    features: Sequence[int],
    n_conv_decoder: Sequence[int],
    num_classes: int,
    deep_supervision: bool,
) -> int:
    """UNetDecoder: per stage its convs, the transposed conv output and (deep supervision) a head.

    Sizes are the encoder skips' (output of each stage but the bottleneck), deepest first.
    """
    skips = []
    size = list(patch)
    for stride in strides[:-1]:
        size = _strided(size, stride)
        skips.append(size)
    n_stages = len(skips)
    total = 0
    for s in range(n_stages):
        skip_size = skips[-(s + 1)]
        skip_channels = features[-(s + 2)]
        total += _stacked_convs(n_conv_decoder[s], skip_channels, skip_size, [1] * len(patch))
        total += _volume(skip_channels, skip_size)
        if deep_supervision or s == n_stages - 1:
            total += _volume(num_classes, skip_size)
    return total


def plain_unet_feature_map_size(
    patch: Shape,
    strides: Sequence[Shape],
    features: Sequence[int],
    n_conv_per_stage: Sequence[int],
    n_conv_per_stage_decoder: Sequence[int],
    num_classes: int,
    deep_supervision: bool = False,
) -> int:
    """``PlainConvUNet.compute_conv_feature_map_size(patch)``: strided-conv encoder + decoder."""
    encoder = 0
    for s, size in enumerate(_encoder_sizes(patch, strides)):
        encoder += _stacked_convs(n_conv_per_stage[s], features[s], size, strides[s])
    return encoder + _decoder(
        patch, strides, features, n_conv_per_stage_decoder, num_classes, deep_supervision
    )


def _basic_block_d(in_channels: int, out_channels: int, size: Shape, stride: Shape) -> int:
    """BasicBlockD: two convs, plus a projection skip when channels or size change."""
    after = _strided(size, stride)
    total = 2 * _volume(out_channels, after)
    if in_channels != out_channels or list(after) != [int(i) for i in size]:
        total += _volume(out_channels, after)
    return total


def resenc_unet_feature_map_size(
    patch: Shape,
    strides: Sequence[Shape],
    features: Sequence[int],
    n_blocks_per_stage: Sequence[int],
    n_conv_per_stage_decoder: Sequence[int],
    num_classes: int,
    deep_supervision: bool = False,
) -> int:
    """``ResidualEncoderUNet.compute_conv_feature_map_size(patch)``: stem + residual stages +
    decoder."""
    total = _volume(features[0], patch)  # stem: one conv to features[0] at full resolution
    in_channels = features[0]
    for s, size in enumerate(_encoder_sizes(patch, strides)):
        total += _basic_block_d(in_channels, features[s], size, strides[s])
        after = _strided(size, strides[s])
        for _ in range(n_blocks_per_stage[s] - 1):
            total += _basic_block_d(features[s], features[s], after, [1] * len(patch))
        in_channels = features[s]
    return total + _decoder(
        patch, strides, features, n_conv_per_stage_decoder, num_classes, deep_supervision
    )
