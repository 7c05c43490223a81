"""Training augmentation: upstream's configuration, geometry, label safety, probabilities, rng."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from scipy import ndimage as ndi

from nnunet_core.training.augmentation import (
    SpatialTransform,
    ValidationTransforms,
    configure_augmentation,
    initial_patch_size,
    pipeline,
    training_transforms,
)
from nnunet_core.training.augmentation import intensity as inten
from nnunet_core.training.augmentation.mirror import mirror
from nnunet_core.training.augmentation.sampling import GridSampler, ScalingSampler, TiledSampler
from nnunet_core.training.augmentation.spatial import _affine_matrix, _sampling_grid

PATCH_3D = (16, 20, 24)
PATCH_2D = (28, 32)


def _sample(shape, n_labels=3, seed=0, channels=1):
    """Random image plus a smooth label map (values 0..n_labels-1) of ``shape``."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((channels, *shape)).astype(np.float32)
    field = ndi.gaussian_filter(rng.standard_normal(shape), 2.0)
    cuts = np.quantile(field, np.linspace(0, 1, n_labels + 1)[1:-1])
    return data, np.digitize(field, cuts).astype(np.int16)[None]


def _pipeline(patch):
    cfg = configure_augmentation(patch)
    tr = training_transforms(patch, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    return cfg, tr


class _Scripted:
    """Stands in for a Generator: random() and uniform() return scripted values."""

    def __init__(self, randoms, uniforms):
        self.randoms, self.uniforms = list(randoms), list(uniforms)

    def random(self):
        return self.randoms.pop(0)

    def uniform(self, _lo, _hi):
        return self.uniforms.pop(0)


# --- configuration -----------------------------------------------------------------------------

# Expected values printed once by upstream nnU-Net 2.8.1 in the peer venv
# (configure_rotation_dummyDA_mirroring_and_inital_patch_size's logic + get_patch_size).
UPSTREAM_CONFIGS = [
    ((48, 56, 64), False, 30, (81, 94, 93)),
    ((40, 112, 112), False, 30, (106, 179, 137)),
    ((20, 192, 160), True, 180, (20, 225, 225)),
    ((10, 64, 64), True, 180, (10, 75, 75)),
    ((56, 64), False, 180, (75, 75)),
    ((32, 96), False, 15, (65, 112)),
]


@pytest.mark.parametrize("patch,dummy,degrees,initial", UPSTREAM_CONFIGS)
def test_configuration_matches_upstream(patch, dummy, degrees, initial):
    cfg = configure_augmentation(patch)
    assert cfg.do_dummy_2d is dummy
    assert cfg.rotation == pytest.approx((-math.radians(degrees), math.radians(degrees)))
    assert cfg.initial_patch_size == initial
    assert cfg.mirror_axes == tuple(range(len(patch)))


def test_initial_patch_caps_rotation_at_90_degrees():
    assert initial_patch_size((40, 50), (-math.pi, math.pi)) == initial_patch_size(
        (40, 50), (0, math.pi / 2)
    )


# --- shapes, types, determinism ----------------------------------------------------------------


@pytest.mark.parametrize("patch", [PATCH_3D, PATCH_2D, (4, 20, 24)])
def test_output_is_final_patch_from_initial(patch):
    cfg, tr = _pipeline(patch)
    data, seg = _sample(cfg.initial_patch_size, channels=2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, s = tr(data, seg, rng)
        assert x.shape == (2, *patch) and x.dtype == np.float32 and x.flags.c_contiguous
        assert s.shape == (1, *patch) and s.dtype == np.int16 and s.flags.c_contiguous


def test_torch_in_torch_out_and_input_untouched():
    cfg, tr = _pipeline(PATCH_3D)
    data, seg = _sample(cfg.initial_patch_size)
    d, s = torch.from_numpy(data.copy()), torch.from_numpy(seg.copy())
    for seed in range(10):
        x, y = tr(d, s, np.random.default_rng(seed))
        assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
    assert np.array_equal(d.numpy(), data) and np.array_equal(s.numpy(), seg)


@pytest.mark.parametrize("patch", [PATCH_3D, PATCH_2D, (4, 20, 24)])
def test_same_seed_same_output(patch):
    cfg, tr = _pipeline(patch)
    data, seg = _sample(cfg.initial_patch_size)
    torch.manual_seed(1)  # torch's global rng must not matter
    first = [tr(data, seg, np.random.default_rng(s)) for s in range(12)]
    torch.manual_seed(2)
    np.random.seed(3)
    again = [tr(data, seg, np.random.default_rng(s)) for s in range(12)]
    for (x1, s1), (x2, s2) in zip(first, again, strict=True):
        assert np.array_equal(x1, x2) and np.array_equal(s1, s2)
    assert any(not np.array_equal(first[0][0], x) for x, _ in first[1:])


def test_pipeline_pickles_for_worker_processes():
    cfg, tr = _pipeline((4, 20, 24))
    data, seg = _sample(cfg.initial_patch_size)
    clone = pickle.loads(pickle.dumps(tr))
    for seed in range(5):
        a, b = (
            tr(data, seg, np.random.default_rng(seed)),
            clone(data, seg, np.random.default_rng(seed)),
        )
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# --- spatial geometry --------------------------------------------------------------------------


def _reference_resample(data, seg, affine, patch):
    """Independent reference: scipy order-1 sampling at upstream's point mapping, zero padding;
    per-label argmax of sampled indicators with outside counted as -1."""
    shape = data.shape[1:]
    q = np.stack(np.meshgrid(*[np.arange(p) - (p - 1) / 2 for p in patch], indexing="ij"))
    coords = np.einsum("ij,j...->i...", affine, q)
    coords += np.array([(s - 1) / 2 for s in shape]).reshape(-1, *[1] * len(patch))
    image = ndi.map_coordinates(data[0], coords, order=1, mode="grid-constant")
    labels = np.unique(seg)
    scores = [
        ndi.map_coordinates((seg[0] == v).astype(float), coords, order=1, mode="grid-constant")
        for v in labels
    ]
    outside = 1 - ndi.map_coordinates(np.ones(shape), coords, order=1, mode="grid-constant")
    stacked = np.stack([outside, *scores])
    best = np.sort(stacked, 0)
    clear = best[-1] - best[-2] > 1e-3  # ties are settled differently (nearest neighbour)
    return image, np.concatenate([[-1], labels])[stacked.argmax(0)], clear


@pytest.mark.parametrize("angles,scale", [([0.3, -0.2, 0.4], 1.3), (None, 0.8), (None, 1.35)])
def test_spatial_matches_reference_resampling(angles, scale):
    shape, patch = (30, 34, 36), (20, 22, 26)
    data, seg = _sample(shape, n_labels=3, seed=4)
    randoms = [0.0 if angles else 0.9, 0.0, 0.9]
    rng = _Scripted(randoms, [*(angles or []), scale])
    st = SpatialTransform(patch, (-1, 1))
    x, s = st(data, seg, rng)
    image, labels, clear = _reference_resample(data, seg, _affine_matrix(angles, scale, 3), patch)
    np.testing.assert_allclose(x[0], image, atol=1e-4)
    assert np.array_equal(s[0][clear], labels[clear])
    assert clear.mean() > 0.95


@pytest.mark.parametrize(
    "angles,scale", [([0.3, -0.2, 0.4], 1.3), (None, 0.8), (None, 1.35), ([2.0, 0.1, -1.0], 0.8)]
)
def test_a_second_seg_channel_moves_as_if_transformed_alone(angles, scale):
    """A cascade stage's loader carries the previous stage as seg channel 1 (its own labels, -1
    where the loader padded): it must move exactly as the target does, as upstream's does."""
    shape, patch = (30, 34, 36), (20, 22, 26)
    data, target = _sample(shape, n_labels=3, seed=4)
    _, previous = _sample(shape, n_labels=2, seed=9)
    previous = previous.copy()
    previous[0, :3] = -1  # padded by the loader
    randoms, normals = [0.0 if angles else 0.9, 0.0, 0.9], [*(angles or []), scale]
    transform = SpatialTransform(patch, (-1, 1))
    _, both = transform(data, np.concatenate([target, previous]), _Scripted(randoms, normals))
    _, alone = transform(data, previous, _Scripted(randoms, normals))
    assert np.array_equal(both[1], alone[0])
    affine = _affine_matrix(angles, scale, 3)
    _, labels, clear = _reference_resample(data, previous, affine, patch)
    assert np.array_equal(both[1][clear], labels[clear]) and clear.mean() > 0.95
    assert set(np.unique(both[1])) <= {-1, 0, 1, 2}


def test_scaling_sampler_equals_grid_sampler():
    shape, patch, center = (30, 34, 36), (20, 22, 26), [15, 17, 18]
    stack = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    for scale in (0.75, 1.4):
        grid = _sampling_grid(np.eye(3) * scale, patch, shape, center, None)
        a, b = GridSampler(grid, shape, True), ScalingSampler([scale] * 3, patch, shape, center)
        np.testing.assert_allclose(a.sample(stack), b.sample(stack), atol=5e-5)
        np.testing.assert_allclose(a.inside_weight(), b.inside_weight(), atol=1e-5)
        assert a.reaches_outside == b.reaches_outside


@pytest.mark.parametrize("angles,scale", [([0.3, -0.2, 0.4], 1.3), ([2.0, 0.1, -1.0], 0.8)])
def test_tiled_sampler_equals_grid_sampler(angles, scale):
    shape, patch, center = (30, 34, 36), (20, 22, 26), [15, 17, 18]
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((1, *shape)).astype(np.float32), rng.random((2, *shape)) > 0.5]
    affine = _affine_matrix(angles, scale, 3)
    grid = GridSampler(_sampling_grid(affine, patch, shape, center, None), shape, True)
    tiled = TiledSampler(affine, patch, shape, center)
    # the mosaic's larger coordinates cost float32 precision: ~1e-4 pixel
    np.testing.assert_allclose(tiled.sample(parts), grid.sample(parts), atol=1e-3)
    np.testing.assert_allclose(tiled.inside_weight(), grid.inside_weight(), atol=1e-4)
    assert tiled.reaches_outside == grid.reaches_outside
    points = np.array([0, 7, 1000, 11439])
    np.testing.assert_allclose(tiled.pixel_coords(points), grid.pixel_coords(points), atol=1e-3)


def test_no_spatial_draw_is_upstream_centre_crop():
    st = SpatialTransform(PATCH_3D, p_rotation=0, p_scaling=0)
    data, seg = _sample((25, 31, 30))
    x, s = st(data, seg, np.random.default_rng(0))
    start = [math.floor(n / 2) - p // 2 for n, p in zip(data.shape[1:], PATCH_3D, strict=True)]
    box = tuple(slice(a, a + p) for a, p in zip(start, PATCH_3D, strict=True))
    assert np.array_equal(x[0], data[0][box]) and np.array_equal(s[0], seg[0][box])


@pytest.mark.parametrize("patch,dummy", [(PATCH_3D, False), ((4, 20, 24), True)])
def test_elastic_and_random_crop_run(patch, dummy):
    st = SpatialTransform(patch, p_rotation=0.5, p_elastic=1, random_crop=True, dummy_2d=dummy)
    data, seg = _sample((4, 34, 36) if dummy else (30, 34, 36))
    for seed in range(3):
        x, s = st(data, seg, np.random.default_rng(seed))
        assert x.shape == (1, *patch) and set(np.unique(s)) <= {-1, 0, 1, 2}


@pytest.mark.parametrize("patch", [PATCH_3D, PATCH_2D, (4, 20, 24)])
def test_seg_labels_stay_in_input_label_set(patch):
    cfg = configure_augmentation(patch)
    data, seg = _sample(cfg.initial_patch_size, n_labels=4)
    seg[(0, 0)] = -1  # loader padding present in the input
    st = SpatialTransform(
        patch, cfg.rotation, p_rotation=0.7, p_scaling=0.7, dummy_2d=cfg.do_dummy_2d
    )
    tr = training_transforms(patch, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    rng = np.random.default_rng(0)
    for _ in range(25):
        assert set(np.unique(st(data, seg, rng)[1])) <= {-1, 0, 1, 2, 3}
        assert set(np.unique(tr(data, seg, rng)[1])) <= {0, 1, 2, 3}


def test_background_only_patch_reaching_outside_the_input():
    """A crop with one label (all background, no loader padding) whose spatial draw reaches past
    the input: the border points compete with the padding label alone. Seed 3 of this 2-D patch
    does so; it raised 'cannot reshape array of size 0' in a training data worker."""
    patch = (56, 64)
    cfg = configure_augmentation(patch)
    tr = training_transforms(patch, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    seg = np.zeros((1, *cfg.initial_patch_size), np.int16)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        data = rng.normal(size=(1, *cfg.initial_patch_size)).astype(np.float32)
        x, s = tr(data, seg, np.random.default_rng(seed))[:2]
        assert tuple(x.shape[-2:]) == patch and set(np.unique(np.asarray(s))) <= {0}


def test_dummy_2d_never_mixes_slices():
    patch = (6, 24, 28)
    assert configure_augmentation(patch).do_dummy_2d
    shape = (6, 40, 40)  # in-plane wider than the patch diagonal: no rotation reaches outside
    level = np.arange(1, 7, dtype=np.float32)[:, None, None]
    data = np.broadcast_to(level, shape)[None].copy()
    seg = np.broadcast_to(np.arange(6, dtype=np.int16)[:, None, None], shape)[None]
    rotate = SpatialTransform(patch, (-math.pi, math.pi), p_rotation=1, p_scaling=0, dummy_2d=True)
    both = SpatialTransform(patch, (-math.pi, math.pi), p_rotation=1, p_scaling=1, dummy_2d=True)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x, s = rotate(data, seg, rng)
        np.testing.assert_allclose(x[0], np.broadcast_to(level, patch), rtol=1e-5)
        assert np.array_equal(s[0], np.broadcast_to(seg[0, :, :1, :1], patch))
        x, s = both(data, seg, rng)  # zooming out may reach outside: only 0-padding appears
        assert np.all(x[0] <= level + 1e-4) and np.all(x[0] >= -1e-6)
        assert np.all((s[0] == seg[0, :, :1, :1]) | (s[0] == -1))


# --- mirror, masking, label replacement ---------------------------------------------------------


def test_mirror_flips_data_and_seg_alike():
    data, seg = _sample(PATCH_3D)
    x, s = mirror(data, seg, (0, 2))
    assert np.array_equal(x, data[:, ::-1, :, ::-1]) and np.array_equal(s, seg[:, ::-1, :, ::-1])


def _isolate(monkeypatch, keep=None):
    """Switch off every intensity transform but ``keep`` (a P_* name of pipeline)."""
    for name in [n for n in dir(pipeline) if n.startswith("P_")]:
        if name != keep:
            monkeypatch.setattr(pipeline, name, 0.0)


def test_pipeline_mirrors_data_and_seg_consistently(monkeypatch):
    _isolate(monkeypatch)
    tr = training_transforms(PATCH_3D, (0, 0), False, (0, 1, 2))
    tr.spatial.p_rotation = tr.spatial.p_scaling = 0
    _, seg = _sample(PATCH_3D, n_labels=5)
    data = seg.astype(np.float32)
    flips = {
        tuple(a for a in range(3) if m >> a & 1): np.flip(
            seg, tuple(a + 1 for a in range(3) if m >> a & 1)
        )
        for m in range(8)
    }
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(60):
        x, s = tr(data, seg, rng)
        assert np.array_equal(x, s.astype(np.float32))
        seen |= {axes for axes, ref in flips.items() if np.array_equal(s, ref)}
    assert len(seen) == 8  # every flip combination shows up


def test_mask_channels_and_padding_label(monkeypatch):
    _isolate(monkeypatch)
    patch = PATCH_3D
    tr = training_transforms(patch, (0, 0), False, (), mask_channels=[1])
    tr.spatial.p_rotation = tr.spatial.p_scaling = 0
    data, seg = _sample(patch, channels=2)
    seg[0, :3] = -1
    x, s = tr(data, seg, np.random.default_rng(0))
    assert np.all(x[1, :3] == 0) and np.array_equal(x[1, 3:], data[1, 3:])
    assert np.array_equal(x[0], data[0]) and -1 not in s and np.all(s[0, :3] == 0)
    _, v = ValidationTransforms()(data, seg)
    assert -1 not in v and np.array_equal(v[0, 3:], seg[0, 3:])


# --- intensity transforms: image only, at upstream's probability --------------------------------

INTENSITY = [  # pipeline constant, expected share of changed samples for one channel
    ("P_NOISE", 0.1),
    ("P_BLUR", 0.2 * 0.5),  # p_per_channel 0.5
    ("P_BRIGHTNESS", 0.15),
    ("P_CONTRAST", 0.15),
    ("P_LOW_RES", 0.25 * 0.5),  # p_per_channel 0.5 (a factor near 1 is a no-op, rarely)
    ("P_GAMMA_INVERTED", 0.1),
    ("P_GAMMA", 0.3),
]


@pytest.mark.parametrize("name,expected", INTENSITY)
def test_intensity_transform_changes_image_only_at_its_probability(monkeypatch, name, expected):
    _isolate(monkeypatch, keep=name)
    tr = training_transforms(PATCH_3D, (0, 0), False, ())
    tr.spatial.p_rotation = tr.spatial.p_scaling = 0
    data, seg = _sample(PATCH_3D)
    data += 3  # positive and not centred, so brightness and gamma show
    rng = np.random.default_rng(123)
    n, changed = 400, 0
    for _ in range(n):
        x, s = tr(data, seg, rng)
        assert np.array_equal(s, seg)
        changed += not np.allclose(x, data, rtol=0, atol=1e-6)
    tolerance = 4 * math.sqrt(expected * (1 - expected) / n)
    assert abs(changed / n - expected) <= tolerance


def test_blur_is_separable_reflect_padded_gaussian():
    data, _ = _sample((6, 9, 11))
    x = data.copy()
    inten.gaussian_blur(x, _Scripted([0.0], [0.6, 0.8, 1.0]), p_per_channel=1)
    expected = data[0]
    for axis, sigma in enumerate((0.6, 0.8, 1.0)):
        kernel = inten.gaussian_kernel(sigma)  # scipy 'mirror' is torch's 'reflect'
        expected = ndi.correlate1d(expected, kernel, axis=axis, mode="mirror")
    np.testing.assert_allclose(x[0], expected, atol=1e-6)


def test_blur_kernel_sizes_follow_upstream():
    assert [len(inten.gaussian_kernel(s)) for s in (0.5, 0.75, 1.0)] == [3, 5, 7]
    assert inten.gaussian_kernel(0.8).sum() == pytest.approx(1)


def test_contrast_keeps_range_and_gamma_keeps_stats():
    data, _ = _sample(PATCH_3D)
    x = data.copy()
    inten.contrast(x, _Scripted([0.9], [1.25]))
    assert x.min() >= data.min() and x.max() <= data.max() and not np.array_equal(x, data)
    for invert in (False, True):
        x = data.copy()
        inten.gamma(x, _Scripted([0.9], [1.4]), invert=invert)
        assert x.mean() == pytest.approx(data.mean(), abs=1e-4)
        assert x.std() == pytest.approx(data.std(), rel=1e-4)


def test_bg_contrast_halves():
    rng = np.random.default_rng(0)
    draws = np.array([inten.bg_contrast(rng, (0.75, 1.25)) for _ in range(2000)])
    assert draws.min() >= 0.75 and draws.max() <= 1.25
    assert abs((draws < 1).mean() - 0.5) < 0.05
