"""Sliding-window prediction: tiling and Gaussian as upstream, exact reconstruction, mirroring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.inference.sliding_window import (
    compute_steps,
    gaussian_importance_map,
    mirror_and_predict,
    pad_to_patch,
    predict_logits_from_folds,
    sliding_window_logits,
    tile_slicers,
)


def _identity_net(dim: int, scales: tuple[float, ...] = (1.0,)) -> torch.nn.Module:
    """Conv whose output channel k is ``scales[k] * input``: a fixed function of each voxel."""
    conv_cls = torch.nn.Conv3d if dim == 3 else torch.nn.Conv2d
    conv = conv_cls(1, len(scales), 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight.zero_()
        for k, s in enumerate(scales):
            conv.weight[(k, 0, *([1] * dim))] = s
    return conv


class _Counting(torch.nn.Module):
    """Wraps a net and counts the tiles (batch entries) it sees."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net, self.tiles, self.calls = net, 0, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.tiles += x.shape[0]
        self.calls += 1
        return self.net(x)


class _DeepSupervision(torch.nn.Module):
    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        out = self.net(x)
        return [out, out[..., ::2, ::2] * 0 + 123.0]


def test_gaussian_shape_peak_values_and_symmetry() -> None:
    g = gaussian_importance_map((5, 8)).numpy()
    assert g.shape == (5, 8) and g.dtype == np.float32
    assert g[2, 4] == g.max() == 10.0  # peak at the centre index size // 2
    assert (g > 0).all()
    # values of upstream's compute_gaussian((5, 8), 1/8, 10, float32) (nnunetv2 2.8.1)
    np.testing.assert_allclose(
        [g[0, 0], g[2, 0], g[0, 4], g[1, 3]],
        [2.0047324e-05, 0.0033546262, 0.059760228, 1.6863815],
        rtol=1e-6,
    )
    odd = gaussian_importance_map((7, 9, 11)).numpy()
    for axis in range(3):
        np.testing.assert_array_equal(odd, np.flip(odd, axis))
    # even sizes: symmetric about the centre voxel (index 4 of 8)
    np.testing.assert_array_equal(g[:, 1:], np.flip(g[:, 1:], 1))


@pytest.mark.parametrize(
    ("image", "tile", "step", "expected"),
    [
        # computed with nnunetv2 2.8.1 compute_step_for_sliding_window in the peer venv
        ((110,), (64,), 0.5, [[0, 23, 46]]),
        (
            (130, 260, 300),
            (64, 128, 128),
            0.5,
            [[0, 22, 44, 66], [0, 44, 88, 132], [0, 57, 115, 172]],
        ),
        ((200, 97), (128, 64), 0.5, [[0, 36, 72], [0, 16, 33]]),
        (
            (300, 257, 141),
            (80, 160, 112),
            0.33,
            [[0, 24, 49, 73, 98, 122, 147, 171, 196, 220], [0, 48, 97], [0, 29]],
        ),
        ((96, 160, 160), (96, 160, 160), 0.5, [[0], [0], [0]]),
        ((65,), (64,), 1.0, [[0, 1]]),
    ],
)
def test_steps_match_upstream(image, tile, step, expected) -> None:
    steps = compute_steps(image, tile, step)
    assert steps == expected
    for axis_steps, size, t in zip(steps, image, tile, strict=True):
        assert axis_steps[0] == 0 and axis_steps[-1] + t == size
        assert all(
            b - a <= t * step + 0.5 for a, b in zip(axis_steps, axis_steps[1:], strict=False)
        )


def test_steps_reject_bad_input() -> None:
    with pytest.raises(ConfigurationError, match="at least the tile"):
        compute_steps((10,), (16,), 0.5)
    with pytest.raises(ConfigurationError, match="step size"):
        compute_steps((32,), (16,), 0)


def test_pad_to_patch_centres_content() -> None:
    data = torch.ones((2, 5, 20, 3))
    padded, revert = pad_to_patch(data, (8, 8, 8))
    assert tuple(padded.shape) == (2, 8, 20, 8)
    # 3 missing -> 1 before, 2 after; 5 missing -> 2 before, 3 after (upstream's pad_nd_image)
    assert revert == (slice(0, 2), slice(1, 6), slice(0, 20), slice(2, 5))
    assert torch.equal(padded[revert], data)
    assert padded.sum() == data.sum()


@pytest.mark.parametrize(
    ("shape", "patch"),
    [((1, 20, 23, 18), (8, 12, 10)), ((1, 5, 7, 30), (8, 8, 8))],
)
def test_identity_network_is_reconstructed_exactly(shape, patch) -> None:
    data = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    net = _Counting(_identity_net(3, (1.0, -2.0)))
    out = sliding_window_logits(net, data, patch, num_outputs=2, step_size=0.5)
    assert tuple(out.shape) == (2, *shape[1:]) and out.dtype == torch.float32
    torch.testing.assert_close(out[0], data[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out[1], -2.0 * data[0], rtol=1e-5, atol=1e-6)
    padded = [max(s, p) for s, p in zip(shape[1:], patch, strict=True)]
    assert net.tiles == np.prod([len(s) for s in compute_steps(padded, patch, 0.5)])


def test_2d_configuration_predicts_slice_by_slice() -> None:
    data = torch.randn((1, 3, 21, 30), generator=torch.Generator().manual_seed(1))
    net = _Counting(_identity_net(2))
    out = sliding_window_logits(net, data, (16, 16), 1, batch_tiles=4, use_gaussian=False)
    torch.testing.assert_close(out[0], data[0], rtol=1e-5, atol=1e-6)
    steps = compute_steps((21, 30), (16, 16), 0.5)
    assert net.tiles == 3 * len(steps[0]) * len(steps[1])
    assert len(tile_slicers((3, 21, 30), (16, 16), 0.5)) == net.tiles


def test_deep_supervision_output_uses_full_resolution_head() -> None:
    data = torch.randn((1, 10, 12, 14), generator=torch.Generator().manual_seed(2))
    out = sliding_window_logits(_DeepSupervision(_identity_net(3)), data, (8, 8, 8), 1)
    torch.testing.assert_close(out[0], data[0], rtol=1e-5, atol=1e-6)


def test_batched_tiles_equal_single_tiles() -> None:
    data = torch.randn((1, 12, 17, 19), generator=torch.Generator().manual_seed(3))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv3d(1, 3, 3, padding=1), torch.nn.Tanh())
    single = sliding_window_logits(net, data, (8, 8, 8), 3)
    batched = sliding_window_logits(net, data, (8, 8, 8), 3, batch_tiles=5)
    torch.testing.assert_close(single, batched)


def _symmetric_conv() -> torch.nn.Module:
    """A conv with a kernel symmetric under every flip: the net commutes with mirroring."""
    torch.manual_seed(0)
    conv = torch.nn.Conv3d(1, 2, 3, padding=1)
    with torch.no_grad():
        w = conv.weight
        for axes in ((2,), (3,), (4,)):
            w.copy_((w + torch.flip(w, axes)) / 2)
    return conv


def test_mirroring_with_equivariant_net_changes_nothing() -> None:
    data = torch.randn((1, 11, 13, 9), generator=torch.Generator().manual_seed(4))
    net = _symmetric_conv()
    plain = sliding_window_logits(net, data, (8, 8, 8), 2)
    counting = _Counting(net)
    mirrored = sliding_window_logits(counting, data, (8, 8, 8), 2, mirror_axes=(0, 1, 2))
    torch.testing.assert_close(plain, mirrored, rtol=1e-5, atol=1e-5)
    tiles = np.prod([len(s) for s in compute_steps((11, 13, 9), (8, 8, 8), 0.5)])
    assert counting.calls == 8 * tiles  # identity + 7 flip combinations per tile


def test_mirroring_averages_all_flip_combinations() -> None:
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    counting = _Counting(torch.nn.Identity())
    # identity net: every flip is undone, so the average is the input itself
    torch.testing.assert_close(mirror_and_predict(counting, x, (0, 1)), x)
    assert counting.calls == 4

    class Ramp(torch.nn.Module):  # adds a position ramp along the last axis: not equivariant
        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return t + torch.arange(t.shape[-1], dtype=t.dtype)

    # flipped passes see the ramp reversed: the mean of ramp and reversed ramp is constant 1.5
    out = mirror_and_predict(Ramp(), x, (1,))
    torch.testing.assert_close(out, x + 1.5)
    with pytest.raises(ConfigurationError, match="mirror axes"):
        mirror_and_predict(counting, x, (2,))


def test_folds_average_logits() -> None:
    data = torch.randn((1, 9, 10, 11), generator=torch.Generator().manual_seed(5))
    nets = [_identity_net(3, (1.0,)), _identity_net(3, (3.0,))]
    out = predict_logits_from_folds(nets, data, (8, 8, 8), 1)
    torch.testing.assert_close(out[0], 2.0 * data[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ConfigurationError, match="at least one network"):
        predict_logits_from_folds([], data, (8, 8, 8), 1)


def test_wrong_number_of_outputs_is_an_error() -> None:
    data = torch.randn((1, 8, 8, 8))
    with pytest.raises(ConfigurationError, match="expected"):
        sliding_window_logits(_identity_net(3, (1.0,)), data, (8, 8, 8), num_outputs=2)
