"""State-dict names of our networks and of upstream's (dynamic_network_architectures).

The layers are the same, the module names are not: upstream nests each conv block in
``convs.<i>`` (plain stages also in a one-element ``Sequential``, residual blocks in ``blocks``),
calls the decoder's upsampling ``transpconvs`` and its heads ``seg_layers``, and registers every
conv block's layers twice (``conv``/``norm`` and again as ``all_modules.<i>``) and the encoder
twice (``encoder`` and ``decoder.encoder``). This module owns the map both ways:

- ``upstream_state_dict(network)``: our weights under upstream's names, duplicates included, so
  upstream's ``load_state_dict`` (strict) takes our checkpoints as they are;
- ``our_state_dict(weights)``: either layout (and ``module.``/``_orig_mod.`` prefixes) to ours;
  upstream's duplicates are checked to equal their originals and dropped.

Upstream's decoder registers its stages before its upsampling, ours the other way round; the
optimizer takes the parameters in upstream's order (``upstream_parameter_order``), so an
optimizer state stored by one side fits the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch
from torch import nn

from nnunet_core.errors import NnunetCoreError

Weights = Mapping[str, torch.Tensor]

# ours -> upstream, per network kind; the decoder's rules are shared
_DECODER_TO_UPSTREAM = (
    (r"^decoder\.ups\.(.+)$", r"decoder.transpconvs.\1"),
    (r"^decoder\.stages\.(\d+)\.(\d+)\.(.+)$", r"decoder.stages.\1.convs.\2.\3"),
    (r"^decoder\.heads\.(.+)$", r"decoder.seg_layers.\1"),
)
_PLAIN_TO_UPSTREAM = (
    (r"^encoder\.stages\.(\d+)\.(\d+)\.(.+)$", r"encoder.stages.\1.0.convs.\2.\3"),
    *_DECODER_TO_UPSTREAM,
)
_RESIDUAL_TO_UPSTREAM = (
    (r"^encoder\.stem\.(.+)$", r"encoder.stem.convs.0.\1"),
    (r"^encoder\.stages\.(\d+)\.(\d+)\.(.+)$", r"encoder.stages.\1.blocks.\2.\3"),
    *_DECODER_TO_UPSTREAM,
)
_DECODER_FROM_UPSTREAM = (
    (r"^decoder\.transpconvs\.(.+)$", r"decoder.ups.\1"),
    (r"^decoder\.stages\.(\d+)\.convs\.(\d+)\.(.+)$", r"decoder.stages.\1.\2.\3"),
    (r"^decoder\.seg_layers\.(.+)$", r"decoder.heads.\1"),
)
_PLAIN_FROM_UPSTREAM = (
    (r"^encoder\.stages\.(\d+)\.0\.convs\.(\d+)\.(.+)$", r"encoder.stages.\1.\2.\3"),
    *_DECODER_FROM_UPSTREAM,
)
_RESIDUAL_FROM_UPSTREAM = (
    (r"^encoder\.stem\.convs\.0\.(.+)$", r"encoder.stem.\1"),
    (r"^encoder\.stages\.(\d+)\.blocks\.(\d+)\.(.+)$", r"encoder.stages.\1.\2.\3"),
    *_DECODER_FROM_UPSTREAM,
)
_UPSTREAM_MARKS = (".all_modules.", "decoder.transpconvs.", "decoder.seg_layers.", ".convs.")
_ENCODER_COPY = "decoder.encoder."
_ALL_MODULES = re.compile(r"^(?P<block>.+)\.all_modules\.(?P<index>\d+)\.(?P<rest>.+)$")
_PREFIXES = ("module.", "_orig_mod.")


class WeightNamesError(NnunetCoreError):
    """Network weights that are neither our layout nor upstream's, or inconsistent copies."""


_UPSTREAM_GROUPS = ("encoder.", "decoder.stages.", "decoder.ups.", "decoder.heads.")


def upstream_parameter_order(network: nn.Module) -> list[nn.Parameter]:
    """``network``'s parameters in the order upstream's network lists them (encoder, decoder
    stages, upsampling, heads); a network of other names keeps its own order."""
    named = list(network.named_parameters())

    def group(name: str) -> int:
        while name.startswith(_PREFIXES):
            name = name.split(".", 1)[1]
        return next(
            (i for i, prefix in enumerate(_UPSTREAM_GROUPS) if name.startswith(prefix)),
            len(_UPSTREAM_GROUPS),
        )

    return [parameter for name, parameter in sorted(named, key=lambda item: group(item[0]))]


def strip_module_prefix(weights: Weights) -> dict[str, torch.Tensor]:
    """Keys without the ``module.``/``_orig_mod.`` prefixes of DDP and compiled models."""
    out = {}
    for key, value in weights.items():
        while key.startswith(_PREFIXES):
            key = key.split(".", 1)[1]
        out[key] = value
    return out


def _rename(key: str, rules: tuple[tuple[str, str], ...]) -> str:
    for pattern, template in rules:
        renamed, count = re.subn(pattern, template, key)
        if count:
            return renamed
    return key


def is_upstream_layout(weights: Weights) -> bool:
    """Upstream's names (any of its conv-block, upsampling or head names)."""
    return any(mark in key for key in weights for mark in _UPSTREAM_MARKS)


def _is_residual(weights: Weights) -> bool:
    return any(key.startswith("encoder.stem.") for key in weights)


def _block_layer_indices(network: nn.Module) -> dict[str, dict[str, int]]:
    """For every conv block (conv, [dropout], [norm], [act]: upstream's ``all_modules`` order),
    the position of each named layer: ``{"encoder.stem": {"conv": 0, "norm": 1}, ...}``."""
    from nnunet_core.model.plain_unet import ConvNormAct

    return {
        name: {child: index for index, child in enumerate(module._modules)}
        for name, module in network.named_modules()
        if isinstance(module, ConvNormAct)
    }


def upstream_state_dict(network: nn.Module) -> dict[str, torch.Tensor]:
    """``network``'s weights under upstream's names, with upstream's duplicate entries."""
    ours = strip_module_prefix(network.state_dict())
    rules = _RESIDUAL_TO_UPSTREAM if _is_residual(ours) else _PLAIN_TO_UPSTREAM
    blocks = _block_layer_indices(network)
    out: dict[str, torch.Tensor] = {}
    for key, value in ours.items():
        name = _rename(key, rules)
        out[name] = value
        block, _, rest = key.rpartition(".")  # rest: the parameter; block.layer: the layer
        block, _, layer = block.rpartition(".")
        if block in blocks:
            upstream_block = name[: -len(f"{layer}.{rest}") - 1]
            out[f"{upstream_block}.all_modules.{blocks[block][layer]}.{rest}"] = value
    encoder = {f"decoder.{k}": v for k, v in out.items() if k.startswith("encoder.")}
    return _upstream_order(out, encoder)


def _upstream_order(
    out: dict[str, torch.Tensor], encoder_copy: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Upstream's key order: encoder, the decoder's encoder copy, then the decoder."""
    encoder = {k: v for k, v in out.items() if k.startswith("encoder.")}
    rest = {k: v for k, v in out.items() if not k.startswith("encoder.")}
    return {**encoder, **encoder_copy, **rest}


def _drop_upstream_copies(weights: Weights) -> dict[str, torch.Tensor]:
    """Upstream's weights without ``decoder.encoder.*`` and ``all_modules.*``, each checked to
    equal the tensor it duplicates (a checkpoint whose copies disagree is not upstream's)."""
    kept = {
        k: v
        for k, v in weights.items()
        if not k.startswith(_ENCODER_COPY) and ".all_modules." not in k
    }
    for key, value in weights.items():
        if key.startswith(_ENCODER_COPY):
            original = key[len("decoder.") :]  # itself checked where it is an all_modules copy
        else:
            match = _ALL_MODULES.match(key)
            if match is None:
                continue
            original = _layer_of(kept, match["block"], match["rest"], int(match["index"]))
        if original not in weights or not torch.equal(weights[original], value):
            msg = f"upstream weights {key!r} should repeat {original!r} but do not"
            raise WeightNamesError(msg)
    return kept


def _layer_of(kept: Weights, block: str, rest: str, index: int) -> str:
    """The named layer (``conv``, ``norm``) behind ``block.all_modules.<index>.<rest>``."""
    if index == 0:
        return f"{block}.conv.{rest}"
    return f"{block}.norm.{rest}" if f"{block}.norm.{rest}" in kept else f"{block}.?{index}.{rest}"


def our_state_dict(weights: Weights) -> dict[str, torch.Tensor]:
    """Weights in our layout, from ours or upstream's (any DDP/compile prefix removed)."""
    weights = strip_module_prefix(weights)
    if not is_upstream_layout(weights):
        return dict(weights)
    kept = _drop_upstream_copies(weights)
    rules = _RESIDUAL_FROM_UPSTREAM if _is_residual(kept) else _PLAIN_FROM_UPSTREAM
    return {_rename(key, rules): value for key, value in kept.items()}
