"""Training augmentation: upstream's configuration, shapes and rng, mirroring and masking,
intensity transforms at their probabilities (the spatial geometry: test_augmentation_spatial.py)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from scipy import ndimage as ndi

from nnunet_core.training.augmentation import (
    ValidationTransforms,
    configure_augmentation,
    initial_patch_size,
    pipeline,
    training_transforms,
)
from nnunet_core.training.augmentation import intensity as inten
from nnunet_core.training.augmentation.mirror import mirror
from tests.helpers.augmentation import (
    PATCH_2D,
    PATCH_3D,
    ScriptedRng,
    configured_pipeline,
    labelled_sample,
)

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
    cfg, tr = configured_pipeline(patch)
    data, seg = labelled_sample(cfg.initial_patch_size, channels=2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, s = tr(data, seg, rng)
        assert x.shape == (2, *patch) and x.dtype == np.float32 and x.flags.c_contiguous
        assert s.shape == (1, *patch) and s.dtype == np.int16 and s.flags.c_contiguous


def test_torch_in_torch_out_and_input_untouched():
    cfg, tr = configured_pipeline(PATCH_3D)
    data, seg = labelled_sample(cfg.initial_patch_size)
    d, s = torch.from_numpy(data.copy()), torch.from_numpy(seg.copy())
    for seed in range(10):
        x, y = tr(d, s, np.random.default_rng(seed))
        assert isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)
    assert np.array_equal(d.numpy(), data) and np.array_equal(s.numpy(), seg)


@pytest.mark.parametrize("patch", [PATCH_3D, PATCH_2D, (4, 20, 24)])
def test_same_seed_same_output(patch):
    cfg, tr = configured_pipeline(patch)
    data, seg = labelled_sample(cfg.initial_patch_size)
    torch.manual_seed(1)  # torch's global rng must not matter
    first = [tr(data, seg, np.random.default_rng(s)) for s in range(12)]
    torch.manual_seed(2)
    np.random.seed(3)
    again = [tr(data, seg, np.random.default_rng(s)) for s in range(12)]
    for (x1, s1), (x2, s2) in zip(first, again, strict=True):
        assert np.array_equal(x1, x2) and np.array_equal(s1, s2)
    assert any(not np.array_equal(first[0][0], x) for x, _ in first[1:])


def test_pipeline_pickles_for_worker_processes():
    cfg, tr = configured_pipeline((4, 20, 24))
    data, seg = labelled_sample(cfg.initial_patch_size)
    clone = pickle.loads(pickle.dumps(tr))
    for seed in range(5):
        a, b = (
            tr(data, seg, np.random.default_rng(seed)),
            clone(data, seg, np.random.default_rng(seed)),
        )
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# --- mirror, masking, label replacement ---------------------------------------------------------


def test_mirror_flips_data_and_seg_alike():
    data, seg = labelled_sample(PATCH_3D)
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
    _, seg = labelled_sample(PATCH_3D, n_labels=5)
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
    data, seg = labelled_sample(patch, channels=2)
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
    data, seg = labelled_sample(PATCH_3D)
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
    data, _ = labelled_sample((6, 9, 11))
    x = data.copy()
    inten.gaussian_blur(x, ScriptedRng([0.0], [0.6, 0.8, 1.0]), p_per_channel=1)
    expected = data[0]
    for axis, sigma in enumerate((0.6, 0.8, 1.0)):
        kernel = inten.gaussian_kernel(sigma)  # scipy 'mirror' is torch's 'reflect'
        expected = ndi.correlate1d(expected, kernel, axis=axis, mode="mirror")
    np.testing.assert_allclose(x[0], expected, atol=1e-6)


def test_blur_kernel_sizes_follow_upstream():
    assert [len(inten.gaussian_kernel(s)) for s in (0.5, 0.75, 1.0)] == [3, 5, 7]
    assert inten.gaussian_kernel(0.8).sum() == pytest.approx(1)


def test_contrast_keeps_range_and_gamma_keeps_stats():
    data, _ = labelled_sample(PATCH_3D)
    x = data.copy()
    inten.contrast(x, ScriptedRng([0.9], [1.25]))
    assert x.min() >= data.min() and x.max() <= data.max() and not np.array_equal(x, data)
    for invert in (False, True):
        x = data.copy()
        inten.gamma(x, ScriptedRng([0.9], [1.4]), invert=invert)
        assert x.mean() == pytest.approx(data.mean(), abs=1e-4)
        assert x.std() == pytest.approx(data.std(), rel=1e-4)


def test_bg_contrast_halves():
    rng = np.random.default_rng(0)
    draws = np.array([inten.bg_contrast(rng, (0.75, 1.25)) for _ in range(2000)])
    assert draws.min() >= 0.75 and draws.max() <= 1.25
    assert abs((draws < 1).mean() - 0.5) < 0.05
