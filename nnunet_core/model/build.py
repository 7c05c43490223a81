"""Build the network a plans configuration describes.

Layer names in plans files ("torch.nn.modules.conv.Conv3d") are looked up in an allow-list
instead of being imported, so reading a plans file can never import or run arbitrary code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.model.init import initialize
from nnunet_core.model.plain_unet import LayerOps, PlainConvUNet
from nnunet_core.model.residual_unet import ResidualEncoderUNet


def _names(classes: Iterable[type[nn.Module]]) -> dict[str, type[nn.Module]]:
    """Each class under its defining path, its ``torch.nn`` alias and its bare name."""
    table: dict[str, type[nn.Module]] = {}
    for cls in classes:
        for name in (f"{cls.__module__}.{cls.__name__}", f"torch.nn.{cls.__name__}", cls.__name__):
            table[name] = cls
    return table


ALLOWED_OPS: dict[str, dict[str, type[nn.Module]]] = {
    "conv_op": _names([nn.Conv2d, nn.Conv3d]),
    "norm_op": _names([nn.InstanceNorm2d, nn.InstanceNorm3d, nn.BatchNorm2d, nn.BatchNorm3d]),
    "dropout_op": _names([nn.Dropout, nn.Dropout2d, nn.Dropout3d]),
    "nonlin": _names([nn.LeakyReLU, nn.ReLU, nn.ELU, nn.GELU, nn.SiLU]),
}
# Ops tied to a dimensionality must agree with the conv (InstanceNorm3d on a 2D net fails late).
_OP_DIMS: dict[type[nn.Module], int] = {
    nn.Conv2d: 2,
    nn.Conv3d: 3,
    nn.InstanceNorm2d: 2,
    nn.InstanceNorm3d: 3,
    nn.BatchNorm2d: 2,
    nn.BatchNorm3d: 3,
    nn.Dropout2d: 2,
    nn.Dropout3d: 3,
}

_UPSTREAM_PREFIX = "dynamic_network_architectures.architectures.unet."
NETWORK_CLASSES: dict[str, type[nn.Module]] = {}
for _cls in (PlainConvUNet, ResidualEncoderUNet):
    for _name in (
        f"{_UPSTREAM_PREFIX}{_cls.__name__}",
        f"{_cls.__module__}.{_cls.__name__}",
        _cls.__name__,
    ):
        NETWORK_CLASSES[_name] = _cls

_COMMON_KEYS = {
    "n_stages",
    "features_per_stage",
    "conv_op",
    "kernel_sizes",
    "strides",
    "n_conv_per_stage_decoder",
    "conv_bias",
    "norm_op",
    "norm_op_kwargs",
    "dropout_op",
    "dropout_op_kwargs",
    "nonlin",
    "nonlin_kwargs",
}
_ENCODER_KEY: dict[type[nn.Module], str] = {
    PlainConvUNet: "n_conv_per_stage",
    ResidualEncoderUNet: "n_blocks_per_stage",
}


def resolve_op(key: str, value: Any) -> type[nn.Module] | None:
    """The layer class an allow-listed name stands for; ``None`` stays ``None`` (except conv)."""
    table = ALLOWED_OPS[key]
    if value is None and key != "conv_op":
        return None
    if isinstance(value, type) and value in table.values():
        return value
    if isinstance(value, str) and value in table:
        return table[value]
    allowed = sorted({f"{c.__module__}.{c.__name__}" for c in table.values()})
    msg = f"{key}={value!r} is not an allowed layer (allowed: {', '.join(allowed)})"
    raise ConfigurationError(msg)


def _per_stage(kwargs: dict[str, Any], key: str, n: int) -> list[int]:
    """A per-stage list; a single int applies to all ``n`` stages (as upstream accepts)."""
    if key not in kwargs:
        msg = f"architecture arch_kwargs lacks {key!r}"
        raise ConfigurationError(msg)
    value = kwargs[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
        msg = f"arch_kwargs {key} must be an int or a list of ints, got {value!r}"
        raise ConfigurationError(msg)
    return [int(v) for v in value]


def _grid(kwargs: dict[str, Any], key: str) -> list[list[int]]:
    value = kwargs.get(key)
    try:
        return [[int(v) for v in entry] for entry in value]
    except (TypeError, ValueError):
        msg = f"arch_kwargs {key} must be a list of per-axis lists, got {value!r}"
        raise ConfigurationError(msg) from None


def layer_ops(kwargs: dict[str, Any], ndim: int) -> LayerOps:
    """Resolve and check the layer types of ``arch_kwargs`` for an ``ndim``-D network."""
    ops = LayerOps(
        conv=resolve_op("conv_op", kwargs.get("conv_op")),
        norm=resolve_op("norm_op", kwargs.get("norm_op")),
        norm_kwargs=dict(kwargs.get("norm_op_kwargs") or {}),
        dropout=resolve_op("dropout_op", kwargs.get("dropout_op")),
        dropout_kwargs=dict(kwargs.get("dropout_op_kwargs") or {}),
        nonlin=resolve_op("nonlin", kwargs.get("nonlin")),
        nonlin_kwargs=dict(kwargs.get("nonlin_kwargs") or {}),
        conv_bias=bool(kwargs.get("conv_bias", True)),
    )
    for key, cls in (("conv_op", ops.conv), ("norm_op", ops.norm), ("dropout_op", ops.dropout)):
        if cls in _OP_DIMS and _OP_DIMS[cls] != ndim:
            msg = f"{key} {cls.__name__} is {_OP_DIMS[cls]}D but kernel_sizes have {ndim} axes"
            raise ConfigurationError(msg)
    for cls, options, key in (
        (ops.norm, ops.norm_kwargs, "norm_op_kwargs"),
        (ops.dropout, ops.dropout_kwargs, "dropout_op_kwargs"),
        (ops.nonlin, ops.nonlin_kwargs, "nonlin_kwargs"),
    ):
        if cls is None:
            continue
        try:
            cls(4, **options) if cls is ops.norm else cls(**options)
        except (TypeError, ValueError) as exc:
            msg = f"{key} {options!r} do not fit {cls.__name__}: {exc}"
            raise ConfigurationError(msg) from None
    return ops


def build_network(
    configuration: Configuration,
    num_input_channels: int,
    num_outputs: int,
    deep_supervision: bool = True,
) -> nn.Module:
    """The initialised network of a resolved plans configuration.

    ``num_outputs``: label count incl. background, or the number of regions.
    """
    architecture = configuration.architecture
    if architecture is None or "network_class_name" not in architecture:
        msg = f"{configuration.where}: no architecture.network_class_name (not an nnU-Net v2 plan?)"
        raise ConfigurationError(msg)
    class_name = architecture["network_class_name"]
    if class_name not in NETWORK_CLASSES:
        known = sorted(n for n in NETWORK_CLASSES if n.startswith(_UPSTREAM_PREFIX))
        msg = f"network_class_name {class_name!r} is not supported (supported: {', '.join(known)})"
        raise ConfigurationError(msg)
    net_cls = NETWORK_CLASSES[class_name]
    kwargs = dict(architecture.get("arch_kwargs") or {})
    encoder_key = _ENCODER_KEY[net_cls]
    unknown = sorted(set(kwargs) - _COMMON_KEYS - {encoder_key})
    if unknown:
        msg = f"arch_kwargs key(s) {', '.join(unknown)} not understood for {net_cls.__name__}"
        raise ConfigurationError(msg)
    kernel_sizes = _grid(kwargs, "kernel_sizes")
    strides = _grid(kwargs, "strides")
    n_stages = int(kwargs.get("n_stages", len(kernel_sizes)))
    if n_stages != len(kernel_sizes) or n_stages < 2:
        msg = f"n_stages={n_stages} but kernel_sizes has {len(kernel_sizes)} entries"
        raise ConfigurationError(msg)
    if num_input_channels < 1 or num_outputs < 1:
        msg = f"need >= 1 input channel and output, got {num_input_channels} and {num_outputs}"
        raise ConfigurationError(msg)
    network = net_cls(
        num_input_channels,
        num_outputs,
        _per_stage(kwargs, "features_per_stage", n_stages),
        kernel_sizes,
        strides,
        _per_stage(kwargs, encoder_key, n_stages),
        _per_stage(kwargs, "n_conv_per_stage_decoder", n_stages - 1),
        layer_ops(kwargs, len(kernel_sizes[0])),
        deep_supervision=deep_supervision,
    )
    return initialize(network)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters (the figure upstream's logs and papers report)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
