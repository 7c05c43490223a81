"""Cascade augmentation: upstream parity (one-hot, operators), component removal, probabilities,
rng determinism and the optional pipeline steps.

Upstream outputs were written once by tests/data/cascade_augmentation/make_upstream_reference.py
in the peer venv (batchgeneratorsv2 of nnU-Net 2.8.1); the tests only read the .npz files.
"""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest
import torch
from scipy import ndimage as ndi

from nnunet_core.training.augmentation import (
    ValidationTransforms,
    cascade,
    configure_augmentation,
    training_transforms,
)
from nnunet_core.training.augmentation.cascade import (
    BINARY_OPERATORS,
    BinaryOperation,
    CascadeTraining,
    apply_binary_operations,
    draw_binary_operations,
    move_seg_as_one_hot,
    remove_random_connected_component,
    structuring_element,
)
from tests.helpers.paths import TEST_DATA

DATA = TEST_DATA / "cascade_augmentation"
OPERATOR_NAMES = ("dilation", "erosion", "closing", "opening")  # upstream's any_of_these order
PATCH = (12, 14, 16)


def _npz(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / name) as f:
        return dict(f)


def _labels(shape, n_labels, seed):
    """Smooth random label map 0..n_labels-1."""
    rng = np.random.default_rng(seed)
    field = ndi.gaussian_filter(rng.standard_normal(shape), 1.5)
    cuts = np.quantile(field, np.linspace(0, 1, n_labels + 1)[1:-1])
    return np.digitize(field, cuts).astype(np.int16)


def _within_binomial(count: int, n: int, p: float) -> bool:
    return abs(count / n - p) <= 4 * math.sqrt(p * (1 - p) / n)


# --- one-hot ------------------------------------------------------------------------------------


def test_one_hot_equals_upstream_and_independent_reference():
    ref = _npz("one_hot.npz")
    labels = [int(v) for v in ref["labels"]]
    data, seg = move_seg_as_one_hot(ref["data"], ref["seg"], labels)
    assert data.dtype == ref["out_data"].dtype == np.float32
    assert np.array_equal(data, ref["out_data"]) and np.array_equal(seg, ref["out_seg"])
    own = np.stack([(ref["seg"][1] == lab) for lab in labels]).astype(np.float32)
    assert np.array_equal(data[:2], ref["data"]) and np.array_equal(data[2:], own)
    assert np.array_equal(seg, ref["seg"][:1])  # the source channel leaves seg


def test_one_hot_needs_the_previous_stage_channel():
    with pytest.raises(ValueError, match="seg channel 1"):
        move_seg_as_one_hot(np.zeros((1, 4, 4), np.float32), np.zeros((1, 4, 4), np.int16), [1])


# --- operators: upstream's functions on the same input and element ------------------------------

OPERATOR_CASES = [
    (dim, radius, i)
    for dim in ("3d", "2d")
    for radius in (1.0, 1.5, 2.0, 2.7, 3.3, 4.6, 7.9)
    for i in range(4)
]


@pytest.mark.parametrize("dim,radius,op", OPERATOR_CASES)
def test_operator_equals_upstream(dim, radius, op):
    ref = _npz("operators.npz")
    mask = ref[f"mask_{dim}"]
    result = BINARY_OPERATORS[op](mask, structuring_element(radius, mask.ndim))
    expected = ref[f"{dim}_{OPERATOR_NAMES[op]}_{radius}"]
    assert result.dtype == bool and np.array_equal(result, expected)


@pytest.mark.parametrize("radius", [1, 2, 3])
def test_operators_equal_scipy_for_symmetric_elements(radius):
    """Independent check: odd symmetric elements; erosion keeps the border (outside = inside)."""
    mask = _labels(PATCH, 3, 7) == 1
    strel = structuring_element(radius, 3)
    dil = ndi.binary_dilation(mask, strel)
    ero = ndi.binary_erosion(mask, strel, border_value=1)
    assert np.array_equal(cascade.dilation(mask, strel), dil)
    assert np.array_equal(cascade.erosion(mask, strel), ero)
    assert np.array_equal(cascade.opening(mask, strel), ndi.binary_dilation(ero, strel))
    closed = ndi.binary_erosion(dil, strel, border_value=1)
    assert np.array_equal(cascade.closing(mask, strel), closed)


def test_empty_and_full_masks():
    strel = structuring_element(2.5, 3)
    empty, full = np.zeros(PATCH, bool), np.ones(PATCH, bool)
    for op in BINARY_OPERATORS:
        assert not op(empty, strel).any() and op(full, strel).all()


def test_binary_operations_on_one_hot_equal_upstream():
    """Several labels in sequence: what a label gains leaves the other labels' channels."""
    ref = _npz("multi_label.npz")
    image = ref["image"].copy()
    ops = [
        BinaryOperation(int(c), int(o), float(r))
        for c, o, r in zip(ref["channels"], ref["operators"], ref["radii"], strict=True)
    ]
    apply_binary_operations(image, [-3, -2, -1], ops)
    assert np.array_equal(image, ref["out"]) and not np.array_equal(image, ref["image"])
    assert image[1:].sum(axis=0).max() <= 1  # still at most one label per voxel


def test_draws_follow_upstream_ranges_and_shuffle():
    rng = np.random.default_rng(0)
    orders, operators, radii = set(), set(), []
    for _ in range(300):
        ops = draw_binary_operations([-3, -2, -1], rng, p_per_label=1.0)
        orders.add(tuple(op.channel for op in ops))
        operators |= {op.operator for op in ops}
        radii += [op.radius for op in ops]
    assert orders == set(itertools.permutations([-3, -2, -1]))  # random label order
    assert operators == {0, 1, 2, 3}
    assert 1 <= min(radii) and max(radii) < 8 and len({round(r, 6) for r in radii}) > 100


# --- connected-component removal ----------------------------------------------------------------


def _components_image():
    """Background channel, label A (a 20%-of-patch slab, 3 small blobs, one only diagonally
    connected) and label B."""
    a = np.zeros((10, 10, 10), bool)
    a[:2] = True  # 200 voxels = 20% > 15%: never removed
    a[4:6, 1:3, 1:3] = True
    a[6, 3, 3] = True  # touches the blob above only by a corner: same component (26-connected)
    a[5:8, 7:9, 7:9] = True
    a[9, 0, 9] = True
    b = np.zeros_like(a)
    b[4:6, 5:7, 0:3] = True
    return np.stack([~(a | b), a, b]).astype(np.float32)


def _component_masks(mask):
    lab, n = ndi.label(mask, structure=np.ones((3, 3, 3)))
    return [lab == i for i in range(1, n + 1)]


def test_removes_exactly_one_small_whole_component_of_that_label_only():
    image = _components_image()
    components = _component_masks(image[1].astype(bool))
    small = [c for c in components if c.sum() < 0.15 * c.size]
    assert len(components) == 4 and len(small) == 3
    seen = set()
    for seed in range(60):
        out = image.copy()
        remove_random_connected_component(out, [-2], np.random.default_rng(seed), p_per_label=1)
        assert np.array_equal(out[[0, 2]], image[[0, 2]])  # other channels untouched
        removed = image[1].astype(bool) & ~out[1].astype(bool)
        hits = [i for i, c in enumerate(small) if np.array_equal(removed, c)]
        assert len(hits) == 1 and not (out[1] > image[1]).any()
        seen.add(hits[0])
        out = image.copy()  # label B: removing its only component clears it
        remove_random_connected_component(out, [-1], np.random.default_rng(seed), p_per_label=1)
        assert np.array_equal(out[[0, 1]], image[[0, 1]]) and not out[2].any()
    assert seen == {0, 1, 2}  # every small component can be picked


def test_nothing_removed_when_all_components_are_too_large_or_label_empty():
    image = np.zeros((2, 10, 10, 10), np.float32)
    image[0, :5] = 1  # 50%: above the limit
    out = image.copy()
    for seed in range(10):
        remove_random_connected_component(out, [0, 1], np.random.default_rng(seed), p_per_label=1)
    assert np.array_equal(out, image)


def test_fill_with_other_class_moves_the_hole():
    image = _components_image()
    out = image.copy()
    remove_random_connected_component(
        out, [0, 1, 2], np.random.default_rng(0), p_per_label=1, fill_with_other_class_p=1
    )
    assert not np.array_equal(out, image)
    assert set(np.unique(out)) <= {0.0, 1.0}


# --- probabilities ------------------------------------------------------------------------------


def test_per_label_probability_is_half():
    rng = np.random.default_rng(5)
    n, channels = 2000, [-3, -2, -1]
    counts = dict.fromkeys(channels, 0)
    for _ in range(n):
        for op in draw_binary_operations(channels, rng):
            counts[op.channel] += 1
    assert all(_within_binomial(c, n, 0.5) for c in counts.values())
    removed, image = 0, _components_image()
    for seed in range(n // 4):
        out = image.copy()
        remove_random_connected_component(out, [-1], np.random.default_rng(seed))
        removed += not np.array_equal(out, image)
    assert _within_binomial(removed, n // 4, 0.5)


@pytest.mark.parametrize(
    "name,p", [("apply_random_binary_operator", 0.4), ("remove_random_connected_component", 0.2)]
)
def test_transform_probability(monkeypatch, name, p):
    calls = []
    monkeypatch.setattr(cascade, name, lambda _data, channels, _rng: calls.append(channels))
    tr = CascadeTraining([1, 2])
    data, seg = np.zeros((1, *PATCH), np.float32), np.stack([_labels(PATCH, 3, s) for s in (1, 2)])
    rng = np.random.default_rng(9)
    n = 2000
    for _ in range(n):
        tr(data, seg, rng)
    assert _within_binomial(len(calls), n, p) and all(c == [-2, -1] for c in calls)


# --- determinism and the pipeline ---------------------------------------------------------------


def _case(labels_prev=4, seed=0):
    cfg = configure_augmentation(PATCH)
    shape = cfg.initial_patch_size
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((1, *shape)).astype(np.float32)
    seg = np.stack([_labels(shape, 3, seed + 1), _labels(shape, labels_prev, seed + 2)])
    return cfg, data, seg


def test_same_seed_same_output_and_global_rngs_unused():
    _, _, seg = _case()
    data = np.zeros((1, *seg.shape[1:]), np.float32)
    tr = CascadeTraining([1, 2, 3])
    np.random.seed(1)
    torch.manual_seed(1)
    first = [tr(data, seg, np.random.default_rng(s)) for s in range(20)]
    np.random.seed(2)
    torch.manual_seed(2)
    again = [tr(data, seg, np.random.default_rng(s)) for s in range(20)]
    for (x1, s1), (x2, s2) in zip(first, again, strict=True):
        assert np.array_equal(x1, x2) and np.array_equal(s1, s2)
    assert len({x.tobytes() for x, _ in first}) > 5  # the perturbation does vary


def test_pipeline_with_cascade_labels():
    cfg, data, seg = _case()
    labels = [1, 2, 3]
    tr = training_transforms(PATCH, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes,
                             cascade_labels=labels)  # fmt: skip
    clone = pickle.loads(pickle.dumps(tr))
    for seed in range(8):
        x, s = tr(torch.from_numpy(data), torch.from_numpy(seg), np.random.default_rng(seed))
        x2, s2 = clone(data, seg, np.random.default_rng(seed))
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
        assert np.array_equal(x.numpy(), x2) and np.array_equal(s.numpy(), s2)
        assert x.shape == (1 + len(labels), *PATCH) and s.shape == (1, *PATCH)
        one_hot = x2[1:]
        assert set(np.unique(one_hot)) <= {0.0, 1.0} and one_hot.sum(axis=0).max() <= 1
    default = training_transforms(PATCH, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    assert default.cascade is None and ValidationTransforms().cascade is None


def test_pipeline_cascade_one_hot_is_the_transformed_channel_1(monkeypatch):
    """Perturbations off: the one-hot is of seg channel 1 as the pipeline without cascade leaves
    it (same rng stream: the cascade draws come last); padding -1 becomes background."""
    monkeypatch.setattr(cascade, "P_BINARY_OPERATOR", 0.0)
    monkeypatch.setattr(cascade, "P_REMOVE_COMPONENT", 0.0)
    cfg, data, seg = _case()
    seg[1, :, :2] = -1
    args = (PATCH, cfg.rotation, cfg.do_dummy_2d, cfg.mirror_axes)
    plain, with_cascade = (
        training_transforms(*args),
        training_transforms(*args, cascade_labels=[3, 1]),
    )
    for seed in range(6):
        x, s = plain(data, seg, np.random.default_rng(seed))
        xc, sc = with_cascade(data, seg, np.random.default_rng(seed))
        assert np.array_equal(xc[:1], x) and np.array_equal(sc, s[:1])
        assert np.array_equal(xc[1], s[1] == 3) and np.array_equal(xc[2], s[1] == 1)
    v, vs = ValidationTransforms(cascade_labels=[3, 1])(data, seg)
    assert v.shape == (3, *seg.shape[1:]) and vs.shape == (1, *seg.shape[1:])
    clean = np.where(seg[1] < 0, 0, seg[1])
    assert np.array_equal(v[1], clean == 3) and np.array_equal(v[2], clean == 1)
    assert np.array_equal(v[0], data[0]) and np.array_equal(vs[0], seg[0])
