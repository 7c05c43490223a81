"""ResidualEncoderUNet: the ResEnc presets' network (residual encoder, plain U-Net decoder).

Layout: a stem conv to ``features[0]``, then per stage ``n_blocks`` residual blocks whose first
block strides. The skip path of a block that changes resolution average-pools, and one that
changes width adds a bias-free 1x1 conv + norm, so the identity path stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from nnunet_core.model.plain_unet import ConvNormAct, Ints, LayerOps, UNetDecoder, check_topology


class ResidualBlock(nn.Module):
    """Two convs with a skip: ``act(norm(conv(act(norm(conv(x))))) + skip(x))``."""

    def __init__(self, ops: LayerOps, in_ch: int, out_ch: int, kernel: Ints, stride: Ints) -> None:
        super().__init__()
        ones = [1] * len(stride)
        self.conv1 = ConvNormAct(ops, in_ch, out_ch, kernel, stride)
        self.conv2 = ConvNormAct(ops, out_ch, out_ch, kernel, ones, activate=False, dropout=False)
        skip: list[nn.Module] = []
        if any(int(s) != 1 for s in stride):
            skip.append(ops.avg_pool(stride))
        if in_ch != out_ch:
            skip.append(
                ConvNormAct(
                    ops, in_ch, out_ch, ones, ones, activate=False, bias=False, dropout=False
                )
            )
        self.skip = nn.Sequential(*skip)  # empty: identity
        self.act = ops.make_nonlin()

    @property
    def branch_end_norm(self) -> nn.Module | None:
        """The norm right before the addition (zeroed at init so each block starts as identity)."""
        return getattr(self.conv2, "norm", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.conv2(self.conv1(x)) + self.skip(x))


class ResidualEncoder(nn.Module):
    """Stem plus residual stages; returns every stage's output, highest resolution first."""

    def __init__(
        self,
        ops: LayerOps,
        in_channels: int,
        features: Ints,
        kernel_sizes: Sequence[Ints],
        strides: Sequence[Ints],
        n_blocks: Ints,
    ) -> None:
        super().__init__()
        ones = [1] * ops.ndim
        self.stem = ConvNormAct(ops, in_channels, features[0], kernel_sizes[0], ones)
        stages = []
        prev = features[0]
        for out_ch, kernel, stride, n in zip(
            features, kernel_sizes, strides, n_blocks, strict=True
        ):
            blocks = [ResidualBlock(ops, prev, out_ch, kernel, stride)]
            blocks += [ResidualBlock(ops, out_ch, out_ch, kernel, ones) for _ in range(n - 1)]
            stages.append(nn.Sequential(*blocks))
            prev = out_ch
        self.stages = nn.ModuleList(stages)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
        return skips


class ResidualEncoderUNet(nn.Module):
    """U-Net with a residual encoder; same outputs contract as ``PlainConvUNet``."""

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        features_per_stage: Ints,
        kernel_sizes: Sequence[Ints],
        strides: Sequence[Ints],
        n_blocks_per_stage: Ints,
        n_conv_per_stage_decoder: Ints,
        ops: LayerOps,
        deep_supervision: bool = True,
    ) -> None:
        super().__init__()
        check_topology(
            ops,
            features_per_stage,
            kernel_sizes,
            strides,
            {"n_blocks_per_stage": n_blocks_per_stage},
            n_conv_per_stage_decoder,
        )
        self.ndim = ops.ndim
        self.deep_supervision = deep_supervision
        self.encoder = ResidualEncoder(
            ops, in_channels, features_per_stage, kernel_sizes, strides, n_blocks_per_stage
        )
        self.decoder = UNetDecoder(
            ops, features_per_stage, kernel_sizes, strides, n_conv_per_stage_decoder, num_classes
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        return self.decoder(self.encoder(x), self.deep_supervision)
