"""``--fp16_accumulation``'s dtypes per device: on CUDA upstream keeps its autocast float16 output,
mirror sum and Gaussian product in float16; on the CPU its passes are float32.

CUDA cannot run here. The CUDA plan (``pass_dtype`` for a CUDA device) is therefore applied on
the CPU to a network that returns float16, as a convolution under CUDA's autocast does; what is
checked is the arithmetic after the network, which is all the plan decides. The float16 values
of a real CUDA convolution differ from these, and no test here pretends otherwise.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from nnunet_core.inference import sliding_window
from nnunet_core.inference.sliding_window import (
    gaussian_importance_map,
    mirror_and_predict,
    pass_dtype,
    sliding_window_logits,
    tile_slicers,
)

PATCH = (8, 16, 16)
AXES = (0, 2)


class _HalfOutput(torch.nn.Module):
    """A convolution whose output is float16, as under CUDA's autocast."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv3d(1, 3, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).half()


def _case() -> torch.Tensor:
    return torch.randn((1, 12, 21, 18), generator=torch.Generator().manual_seed(2))


def _upstream_float16(net: torch.nn.Module, data: torch.Tensor) -> torch.Tensor:
    """Upstream's CUDA arithmetic, one tile at a time, written out: every step in float16."""
    gaussian = gaussian_importance_map(PATCH, dtype=torch.float16)
    sums = torch.zeros((3, *data.shape[1:]), dtype=torch.float16)
    counts = torch.zeros(data.shape[1:], dtype=torch.float16)
    flips = [c for n in (1, 2) for c in itertools.combinations([a + 2 for a in AXES], n)]
    with torch.no_grad():
        for tile in tile_slicers(data.shape[1:], PATCH, 0.5):
            x = data[(slice(None), *tile)][None]
            prediction = net(x)
            for flip in flips:
                prediction += torch.flip(net(torch.flip(x, flip)), flip)
            prediction /= len(flips) + 1
            prediction = prediction[0] * gaussian
            sums[(slice(None), *tile)] += prediction
            counts[tile] += gaussian
    return sums / counts


@pytest.mark.parametrize(
    ("device", "accumulate", "expected"),
    [
        ("cuda", torch.float16, None),  # the autocast output as it is: float16 throughout
        ("cuda", torch.float32, torch.float32),
        ("cpu", torch.float16, torch.float32),  # upstream's CPU products are float32
        ("cpu", torch.float32, torch.float32),
        ("mps", torch.float16, torch.float32),  # upstream runs no autocast there
    ],
)
def test_the_dtype_plan_per_device(device: str, accumulate: torch.dtype, expected) -> None:
    assert pass_dtype(torch.device(device), accumulate) is expected


def test_a_kept_pass_stays_float16_through_the_mirror_average() -> None:
    x = torch.randn((1, 1, *PATCH), generator=torch.Generator().manual_seed(3))
    net = _HalfOutput().eval()
    with torch.no_grad():
        kept = mirror_and_predict(net, x, AXES, dtype=None)
        converted = mirror_and_predict(net, x, AXES)
    assert kept.dtype == torch.float16 and converted.dtype == torch.float32
    assert not torch.equal(kept.float(), converted)  # the float16 sum rounds: the plan matters


def test_the_cuda_plan_repeats_upstreams_float16_arithmetic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    net, data = _HalfOutput().eval(), _case()
    cpu_plan = sliding_window_logits(
        net, data, PATCH, 3, mirror_axes=AXES, accumulate=torch.float16
    )
    real = sliding_window.pass_dtype
    monkeypatch.setattr(
        sliding_window, "pass_dtype", lambda _device, dtype: real(torch.device("cuda"), dtype)
    )
    cuda_plan = sliding_window_logits(
        net, data, PATCH, 3, mirror_axes=AXES, accumulate=torch.float16
    )
    expected = _upstream_float16(net, data)
    assert cuda_plan.dtype == torch.float16
    assert torch.equal(cuda_plan, expected)
    assert not torch.equal(cpu_plan, expected)  # float32 passes would not give upstream's numbers


def test_float32_sums_convert_every_pass_on_cuda_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Default sums: the CUDA plan converts each pass, so a float16 output gives what the CPU
    plan gives."""
    net, data = _HalfOutput().eval(), _case()
    cpu_plan = sliding_window_logits(net, data, PATCH, 3, mirror_axes=AXES)
    real = sliding_window.pass_dtype
    monkeypatch.setattr(
        sliding_window, "pass_dtype", lambda _device, dtype: real(torch.device("cuda"), dtype)
    )
    cuda_plan = sliding_window_logits(net, data, PATCH, 3, mirror_axes=AXES)
    assert cuda_plan.dtype == torch.float32 and torch.equal(cuda_plan, cpu_plan)
