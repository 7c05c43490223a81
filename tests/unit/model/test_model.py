"""Networks built from plans: upstream's parameter count, output shapes, dimensionality, safety."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import load_plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.model import PlainConvUNet, ResidualEncoderUNet, build_network, count_parameters
from nnunet_core.model.residual_unet import ResidualBlock
from nnunet_core.training.deep_supervision import deep_supervision_scales
from tests.helpers.paths import TEST_DATA

PLANS_DIR = TEST_DATA / "plans"
PEER_PLANS = PLANS_DIR / "synth3d_peer900" / "nnUNetPlans.json"
RESENC_PLANS = PLANS_DIR / "a_Dataset901_IsoCT" / "nnUNetResEncUNetMPlans.json"
# Upstream (dynamic_network_architectures PlainConvUNet) builds this many parameters from the
# 3d_fullres plan with 1 input channel and 3 classes. Heads exist on every decoder stage
# whether or not deep supervision is on, so both settings give the same figure.
UPSTREAM_3D_FULLRES_PARAMS = 16_137_900


def _config(name: str, plans: Path = PEER_PLANS) -> dict[str, Any]:
    """The resolved configuration as a dict the tests may edit before building."""
    return load_plans(plans).configuration(name).raw


def _build(config: dict[str, Any], *args: Any, **kwargs: Any) -> torch.nn.Module:
    return build_network(Configuration("test", config), *args, **kwargs)


def _tiny_2d_config() -> dict[str, Any]:
    config = _config("2d")
    config["architecture"]["arch_kwargs"]["features_per_stage"] = [4, 8, 8, 8]
    return config


@pytest.mark.parametrize("deep_supervision", [True, False])
def test_3d_fullres_parameter_count_equals_upstream(deep_supervision: bool) -> None:
    net = _build(_config("3d_fullres"), 1, 3, deep_supervision=deep_supervision)
    assert isinstance(net, PlainConvUNet)
    assert count_parameters(net) == UPSTREAM_3D_FULLRES_PARAMS


def test_heads_on_every_decoder_stage() -> None:
    net = _build(_config("3d_fullres"), 1, 3)
    heads = net.decoder.heads
    assert len(heads) == 4
    head_params = sum(p.numel() for p in heads.parameters())
    assert head_params == sum(c * 3 + 3 for c in (256, 128, 64, 32))


def test_2d_forward_shapes_per_deep_supervision_level() -> None:
    config = _config("2d")
    net = _build(config, 1, 3)
    x = torch.randn(2, 1, 32, 40)
    with torch.no_grad():
        outputs = net(x)
    scales = deep_supervision_scales(config["architecture"]["arch_kwargs"]["strides"])
    expected = [(2, 3, round(32 * sy), round(40 * sx)) for sy, sx in scales]
    assert (
        [tuple(o.shape) for o in outputs]
        == expected
        == [
            (2, 3, 32, 40),
            (2, 3, 16, 20),
            (2, 3, 8, 10),
        ]
    )
    net.deep_supervision = False
    with torch.no_grad():
        single = net(x)
    assert isinstance(single, torch.Tensor)
    assert tuple(single.shape) == (2, 3, 32, 40)
    torch.testing.assert_close(single, outputs[0])


def test_3d_forward_shapes_follow_anisotropic_strides() -> None:
    config = _config("3d_fullres")
    net = _build(config, 1, 3)
    x = torch.randn(1, 1, 16, 16, 32)  # cumulative strides (8, 8, 16): a 2x2x2 bottleneck
    with torch.no_grad():
        outputs = net(x)
    assert [tuple(o.shape[2:]) for o in outputs] == [
        (16, 16, 32),
        (16, 8, 16),
        (8, 4, 8),
        (4, 2, 4),
    ]


@pytest.mark.parametrize(
    ("name", "conv", "norm"),
    [
        ("2d", nn.Conv2d, nn.InstanceNorm2d),
        ("3d_fullres", nn.Conv3d, nn.InstanceNorm3d),
    ],
)
def test_dimensionality_follows_kernel_length(name: str, conv: type, norm: type) -> None:
    net = _build(_config(name), 1, 3)
    kernel_axes = len(_config(name)["architecture"]["arch_kwargs"]["kernel_sizes"][0])
    assert net.ndim == kernel_axes
    convs = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Conv3d))]
    assert convs and all(type(m) is conv for m in convs)
    norms = [m for m in net.modules() if isinstance(m, (nn.InstanceNorm2d, nn.InstanceNorm3d))]
    assert norms and all(type(m) is norm and m.affine and m.eps == 1e-5 for m in norms)


def test_layer_details_match_the_plan() -> None:
    net = _build(_config("3d_fullres"), 1, 3)
    first = net.encoder.stages[0][0]
    assert first.conv.kernel_size == (1, 3, 3) and first.conv.padding == (0, 1, 1)
    assert isinstance(first.act, nn.LeakyReLU) and first.act.negative_slope == 0.01
    down = net.encoder.stages[4][0].conv
    assert down.stride == (2, 1, 2) and net.encoder.stages[4][1].conv.stride == (1, 1, 1)
    up = net.decoder.ups[0]
    assert isinstance(up, nn.ConvTranspose3d)
    assert up.kernel_size == up.stride == (2, 1, 2) and up.bias is not None


def test_he_init_and_zero_biases() -> None:
    net = _build(_config("3d_fullres"), 1, 3)
    conv = net.encoder.stages[3][1].conv  # 256 -> 256, 3x3x3: fan_in 6912
    expected_std = math.sqrt(2.0 / ((1 + 0.01**2) * 256 * 27))
    assert conv.weight.std().item() == pytest.approx(expected_std, rel=0.02)
    biases = [m.bias for m in net.modules() if isinstance(m, nn.modules.conv._ConvNd)]
    assert all(torch.count_nonzero(b) == 0 for b in biases if b is not None)


def test_arbitrary_op_names_are_refused() -> None:
    config = _config("2d")
    config["architecture"]["arch_kwargs"]["nonlin"] = "os.system"
    with pytest.raises(ConfigurationError, match="os.system"):
        _build(config, 1, 3)


def test_conv_dimension_must_match_kernels() -> None:
    config = _config("2d")
    config["architecture"]["arch_kwargs"]["conv_op"] = "torch.nn.modules.conv.Conv3d"
    with pytest.raises(ConfigurationError, match="Conv3d is 3D"):
        _build(config, 1, 3)


@pytest.mark.parametrize(
    ("key", "value", "pattern"),
    [
        ("n_conv_per_stage_decoder", [2, 2], "expected 3"),
        ("strides", [[1, 1], [2, 2], [2, 2]], "strides has 3 entries"),
        ("norm_op_kwargs", {"bogus": 1}, "bogus"),
        ("mystery", 1, "mystery"),
    ],
)
def test_inconsistent_arch_kwargs_are_named(key: str, value: Any, pattern: str) -> None:
    config = copy.deepcopy(_config("2d"))
    config["architecture"]["arch_kwargs"][key] = value
    with pytest.raises(ConfigurationError, match=pattern):
        _build(config, 1, 3)


def test_unknown_network_class_is_named() -> None:
    config = _config("2d")
    config["architecture"]["network_class_name"] = "evil.module.Net"
    with pytest.raises(ConfigurationError, match="evil.module.Net"):
        _build(config, 1, 3)


def test_tiny_2d_net_overrides_work() -> None:
    net = _build(_tiny_2d_config(), 2, 4, deep_supervision=False)
    out = net(torch.randn(1, 2, 16, 16))
    assert tuple(out.shape) == (1, 4, 16, 16)


def test_residual_encoder_unet_from_resenc_plans() -> None:
    config = _config("2d", RESENC_PLANS)
    kwargs = config["architecture"]["arch_kwargs"]
    kwargs["features_per_stage"] = [4, 8, 8, 16, 16, 16, 16]
    net = _build(config, 1, 3)
    assert isinstance(net, ResidualEncoderUNet)
    blocks = [m for m in net.modules() if isinstance(m, ResidualBlock)]
    assert len(blocks) == sum(kwargs["n_blocks_per_stage"])
    assert all(torch.count_nonzero(b.branch_end_norm.weight) == 0 for b in blocks)
    # Block 0 of stage 0 keeps size and width: identity skip; a strided widening block projects.
    assert len(net.encoder.stages[0][0].skip) == 0
    assert len(net.encoder.stages[1][0].skip) == 2
    assert len(net.encoder.stages[5][0].skip) == 1  # 16 -> 16 strided: pool only
    with torch.no_grad():
        outputs = net(torch.randn(1, 1, 128, 128))  # 6 poolings: a 2x2 bottleneck
    assert [tuple(o.shape[2:]) for o in outputs] == [(128 // 2**i,) * 2 for i in range(6)]
