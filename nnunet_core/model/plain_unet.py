"""PlainConvUNet: the plain nnU-Net architecture (strided-conv encoder, transposed-conv decoder).

The layer layout (and therefore the parameter count) follows the networks upstream nnU-Net
builds from the same plans, so a plans file means the same model here and there. The decoder
and the conv block are shared with the residual-encoder variant.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from nnunet_core.errors import ConfigurationError

Ints = Sequence[int]

_CONV_DIMS: dict[type[nn.Module], int] = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}
_TRANSPOSED: dict[int, type[nn.Module]] = {
    1: nn.ConvTranspose1d,
    2: nn.ConvTranspose2d,
    3: nn.ConvTranspose3d,
}
_AVG_POOL: dict[int, type[nn.Module]] = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}


@dataclass(frozen=True, eq=False)
class LayerOps:
    """The layer types (and their options) a U-Net uses in every conv block.

    Resolved once from the plans so the network classes never see layer names as strings.
    """

    conv: type[nn.Module]
    norm: type[nn.Module] | None = None
    norm_kwargs: dict[str, Any] = field(default_factory=dict)
    dropout: type[nn.Module] | None = None
    dropout_kwargs: dict[str, Any] = field(default_factory=dict)
    nonlin: type[nn.Module] | None = None
    nonlin_kwargs: dict[str, Any] = field(default_factory=dict)
    conv_bias: bool = True

    @property
    def ndim(self) -> int:
        """Spatial dimensions of the convolutions (2 or 3 for nnU-Net)."""
        if self.conv not in _CONV_DIMS:
            msg = f"conv op {self.conv.__name__} is not a torch ConvNd"
            raise ConfigurationError(msg)
        return _CONV_DIMS[self.conv]

    def transposed_conv(self, in_ch: int, out_ch: int, stride: Ints) -> nn.Module:
        """Learned upsampling whose kernel equals its stride (no overlap, exact size doubling)."""
        stride = tuple(int(s) for s in stride)
        return _TRANSPOSED[self.ndim](in_ch, out_ch, stride, stride, bias=self.conv_bias)

    def avg_pool(self, stride: Ints) -> nn.Module:
        stride = tuple(int(s) for s in stride)
        return _AVG_POOL[self.ndim](stride, stride)

    def make_nonlin(self) -> nn.Module:
        return self.nonlin(**self.nonlin_kwargs) if self.nonlin is not None else nn.Identity()


class ConvNormAct(nn.Sequential):
    """conv -> [dropout] -> [norm] -> [nonlin]; padding kernel//2 keeps 'same' size at stride 1."""

    def __init__(
        self,
        ops: LayerOps,
        in_ch: int,
        out_ch: int,
        kernel: Ints,
        stride: Ints,
        *,
        activate: bool = True,
        bias: bool | None = None,
        dropout: bool = True,
    ) -> None:
        kernel = tuple(int(k) for k in kernel)
        stride = tuple(int(s) for s in stride)
        padding = tuple(k // 2 for k in kernel)
        use_bias = ops.conv_bias if bias is None else bias
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        layers["conv"] = ops.conv(in_ch, out_ch, kernel, stride, padding, bias=use_bias)
        if dropout and ops.dropout is not None:
            layers["dropout"] = ops.dropout(**ops.dropout_kwargs)
        if ops.norm is not None:
            layers["norm"] = ops.norm(out_ch, **ops.norm_kwargs)
        if activate and ops.nonlin is not None:
            layers["act"] = ops.make_nonlin()
        super().__init__(layers)


def conv_stack(
    ops: LayerOps, n_convs: int, in_ch: int, out_ch: int, kernel: Ints, stride: Ints
) -> nn.Sequential:
    """``n_convs`` conv blocks; only the first one is strided (it does the downsampling)."""
    if n_convs < 1:
        msg = f"a conv stack needs at least one conv, got n_convs={n_convs}"
        raise ConfigurationError(msg)
    ones = [1] * len(stride)
    blocks = [ConvNormAct(ops, in_ch, out_ch, kernel, stride)]
    blocks += [ConvNormAct(ops, out_ch, out_ch, kernel, ones) for _ in range(n_convs - 1)]
    return nn.Sequential(*blocks)


def check_topology(
    ops: LayerOps,
    features: Ints,
    kernel_sizes: Sequence[Ints],
    strides: Sequence[Ints],
    per_stage: dict[str, Ints],
    n_conv_decoder: Ints,
) -> None:
    """Lengths and dimensions agree, so a broken plans file fails here and not mid-forward."""
    n = len(features)
    if n < 2:
        msg = f"a U-Net needs at least 2 stages, got features_per_stage={list(features)}"
        raise ConfigurationError(msg)
    for name, values in {"kernel_sizes": kernel_sizes, "strides": strides, **per_stage}.items():
        if len(values) != n:
            msg = f"{name} has {len(values)} entries but there are {n} stages"
            raise ConfigurationError(msg)
    if len(n_conv_decoder) != n - 1:
        msg = f"n_conv_per_stage_decoder has {len(n_conv_decoder)} entries, expected {n - 1}"
        raise ConfigurationError(msg)
    for name, values in (("kernel_sizes", kernel_sizes), ("strides", strides)):
        for entry in values:
            if len(entry) != ops.ndim:
                msg = (
                    f"{name} entry {list(entry)} has {len(entry)} axes but {ops.conv.__name__} is "
                    f"{ops.ndim}D"
                )
                raise ConfigurationError(msg)


class UNetDecoder(nn.Module):
    """Upsample, concatenate the skip, convolve; a 1x1 head on every stage.

    Heads exist on every stage whether or not deep supervision is on (as upstream), so the
    parameter count and checkpoints do not depend on the flag; only the outputs do.
    """

    def __init__(
        self,
        ops: LayerOps,
        features: Ints,
        kernel_sizes: Sequence[Ints],
        strides: Sequence[Ints],
        n_conv_decoder: Ints,
        num_classes: int,
    ) -> None:
        super().__init__()
        ups, stages, heads = [], [], []
        ones = [1] * ops.ndim
        # Decoder stage i (0 = deepest) upsamples encoder level n-1-i to the skip at level n-2-i.
        for i, level in enumerate(range(len(features) - 1, 0, -1)):
            skip_ch = features[level - 1]
            ups.append(ops.transposed_conv(features[level], skip_ch, strides[level]))
            stages.append(
                conv_stack(
                    ops, n_conv_decoder[i], 2 * skip_ch, skip_ch, kernel_sizes[level - 1], ones
                )
            )
            heads.append(ops.conv(skip_ch, num_classes, [1] * ops.ndim, bias=True))
        self.ups = nn.ModuleList(ups)
        self.stages = nn.ModuleList(stages)
        self.heads = nn.ModuleList(heads)

    def forward(
        self, skips: Sequence[torch.Tensor], deep_supervision: bool
    ) -> torch.Tensor | list[torch.Tensor]:
        """``skips`` highest resolution first; returns outputs highest resolution first."""
        x = skips[-1]
        outputs: list[torch.Tensor] = []
        last = len(self.stages) - 1
        for i, (up, stage, head) in enumerate(zip(self.ups, self.stages, self.heads, strict=True)):
            x = stage(torch.cat((up(x), skips[-(i + 2)]), dim=1))
            if deep_supervision or i == last:
                outputs.append(head(x))
        outputs.reverse()
        return outputs if deep_supervision else outputs[0]


class PlainEncoder(nn.Module):
    """Stages of plain conv blocks; each stage's first conv carries the stage's stride."""

    def __init__(
        self,
        ops: LayerOps,
        in_channels: int,
        features: Ints,
        kernel_sizes: Sequence[Ints],
        strides: Sequence[Ints],
        n_convs: Ints,
    ) -> None:
        super().__init__()
        stages = []
        for out_ch, kernel, stride, n in zip(features, kernel_sizes, strides, n_convs, strict=True):
            stages.append(conv_stack(ops, n, in_channels, out_ch, kernel, stride))
            in_channels = out_ch
        self.stages = nn.ModuleList(stages)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Every stage's output, highest resolution first (the last one is the bottleneck)."""
        skips = []
        for stage in self.stages:
            x = stage(x)
            skips.append(x)
        return skips


class PlainConvUNet(nn.Module):
    """U-Net with plain conv stages; returns a list of outputs under deep supervision.

    ``deep_supervision`` may be toggled after construction (validation and inference use the
    single full-resolution output).
    """

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        features_per_stage: Ints,
        kernel_sizes: Sequence[Ints],
        strides: Sequence[Ints],
        n_conv_per_stage: Ints,
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
            {"n_conv_per_stage": n_conv_per_stage},
            n_conv_per_stage_decoder,
        )
        self.ndim = ops.ndim
        self.deep_supervision = deep_supervision
        self.encoder = PlainEncoder(
            ops, in_channels, features_per_stage, kernel_sizes, strides, n_conv_per_stage
        )
        self.decoder = UNetDecoder(
            ops, features_per_stage, kernel_sizes, strides, n_conv_per_stage_decoder, num_classes
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        return self.decoder(self.encoder(x), self.deep_supervision)
