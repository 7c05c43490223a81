"""Patch sampling, batch assembly and worker streams on a tiny dataset preprocessed by the real
CLI."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from nnunet_core import cli
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.blosc2_store import save_array
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.io.plans import resolve_configuration
from nnunet_core.runtime.cpus import default_num_workers
from nnunet_core.training.augmentation.pipeline import (
    ValidationTransforms,
    configure_augmentation,
    training_transforms,
)
from nnunet_core.training.data.case_store import CaseStore, parse_class_key
from nnunet_core.training.data.patch_loader import PatchLoader, SampleError, validation_loader
from nnunet_core.training.data.patch_sampling import (
    box_bounds,
    choose_box,
    crop_and_pad,
    forced_mask,
    sample_rng,
)
from nnunet_core.training.data.workers import BatchStream, WorkerError
from nnunet_core.training.deep_supervision import deep_supervision_scales

DATASET = "Dataset901_Loader"


@pytest.fixture(scope="module")
def preprocessed(make_raw_dataset, tmp_path_factory) -> Path:
    """``<preprocessed>/Dataset901_Loader`` with 2d and 3d_fullres, made by the CLI."""
    root = tmp_path_factory.mktemp("loader")
    make_raw_dataset(root / "raw" / DATASET, num_training=5, num_test=0)
    roots = ["-d", DATASET, "--raw", str(root / "raw"), "--preprocessed", str(root / "pre")]
    # the real command line, in-process: three interpreter start-ups would cost seconds
    for step in (["fingerprint", "-np", "1"], ["plan"], ["preprocess", "-np", "1", "--no-pbar"]):
        assert cli.main([step[0], *roots, *step[1:]]) == 0, step
    return root / "pre" / DATASET


def _config(preprocessed: Path, name: str) -> dict:
    plans = json.loads((preprocessed / "nnUNetPlans.json").read_text())
    return resolve_configuration(plans, name)


@pytest.fixture(scope="module")
def store3d(preprocessed: Path) -> CaseStore:
    return CaseStore(preprocessed / _config(preprocessed, "3d_fullres")["data_identifier"])


@pytest.fixture(scope="module")
def store2d(preprocessed: Path) -> CaseStore:
    return CaseStore(preprocessed / _config(preprocessed, "2d")["data_identifier"])


def _equal(a: dict, b: dict) -> bool:
    targets_a = a["target"] if isinstance(a["target"], list) else [a["target"]]
    targets_b = b["target"] if isinstance(b["target"], list) else [b["target"]]
    return (
        a["keys"] == b["keys"]
        and torch.equal(a["data"], b["data"])
        and all(torch.equal(x, y) for x, y in zip(targets_a, targets_b, strict=True))
    )


def _has_foreground(target: torch.Tensor) -> np.ndarray:
    return (target.flatten(1) > 0).any(1).numpy()


class CenterCrop:
    """A deterministic stand-in for the spatial transform: cut the final patch from the centre."""

    def __init__(self, patch: tuple[int, ...]) -> None:
        self.patch = patch

    def __call__(self, data, seg, _rng):
        lower = [(s - p) // 2 for s, p in zip(data.shape[1:], self.patch, strict=True)]
        box = (slice(None), *(slice(lo, lo + p) for lo, p in zip(lower, self.patch, strict=True)))
        return data[box], seg[box]


def test_forced_mask_matches_upstream_positions() -> None:
    assert forced_mask(2) == [False, True]
    assert [j for j, f in enumerate(forced_mask(12)) if f] == [8, 9, 10, 11]
    assert not any(forced_mask(5, 0.0)) and all(forced_mask(5, 1.0))


def test_sample_rng_is_a_pure_function_of_its_arguments() -> None:
    draw = sample_rng(3, "all", 7, 11, 1).integers(1 << 30, size=4)
    assert np.array_equal(draw, sample_rng(3, "all", 7, 11, 1).integers(1 << 30, size=4))
    for other in (
        (4, "all", 7, 11, 1),
        (3, 0, 7, 11, 1),
        (3, "all", 8, 11, 1),
        (3, "all", 7, 11, 2),
    ):
        assert not np.array_equal(draw, sample_rng(*other).integers(1 << 30, size=4))
    assert not np.array_equal(
        draw, sample_rng(3, "all", 7, 11, 1, stream=1).integers(1 << 30, size=4)
    )


def test_store_lists_cases_and_parses_class_keys(store3d: CaseStore) -> None:
    assert len(store3d) == 5
    case = store3d.case(store3d.case_ids[0])
    assert case.data.dtype == np.float32 and case.seg.dtype == np.int16
    assert set(case.class_locations) == {1, 2}
    locations = case.class_locations[1]
    assert locations.shape[1] == 3 and len(locations) > 0
    seg = case.seg[:]
    assert (seg[0][tuple(locations.T)] == 1).all()  # rows are spatial (z, y, x) of that class
    assert parse_class_key("(-1, 0, 1)") == (-1, 0, 1) and parse_class_key("2") == 2


def test_crop_pads_data_with_zero_and_seg_with_minus_one(store3d: CaseStore) -> None:
    case = store3d.case(store3d.case_ids[1])
    z, y, x = case.shape
    lower, size = (-2, y - 3, -1), (4, 6, x + 2)
    data = crop_and_pad(case.data, lower, size, 0)
    seg = crop_and_pad(case.seg, lower, size, -1)
    assert data.shape == (1, *size) and seg.shape == (1, *size) and seg.dtype == np.int16
    inside = (slice(None), slice(2, 4), slice(0, 3), slice(1, 1 + x))
    assert np.array_equal(data[inside], case.data[:, 0:2, y - 3 : y, :])
    assert np.array_equal(seg[inside], case.seg[:, 0:2, y - 3 : y, :])
    outside = np.ones(size, dtype=bool)
    outside[inside[1:]] = False
    assert (data[0][outside] == 0).all() and (seg[0][outside] == -1).all()
    far = crop_and_pad(case.seg, (z + 5, 0, 0), (2, 2, 2), -1)
    assert (far == -1).all()


# (shape, patch, final patch) -> the lowest and highest lower corner that upstream 2.8.1's
# nnUNetDataLoader.get_bbox drew in 20,000 unforced draws (printed once in the peer venv)
UPSTREAM_BOX_BOUNDS = [
    (((10, 40, 40), (12, 30, 30), (8, 20, 20)), [-2, -5, -5], [0, 15, 15]),
    (((5, 40, 40), (8, 20, 20), (8, 20, 20)), [-2, 0, 0], [-1, 20, 20]),  # padded to fit
    (((40, 48, 37), (28, 32, 29), (16, 20, 20)), [-6, -6, -5], [18, 22, 13]),  # odd need
    (((10, 30, 25), (28, 32, 29), (16, 20, 20)), [-9, -6, -5], [-9, 4, 1]),
    (((64, 57), (71, 69), (56, 56)), [-8, -7], [1, -5]),
]


@pytest.mark.parametrize("sizes,lowest,highest", UPSTREAM_BOX_BOUNDS)
def test_box_bounds_follow_upstream_get_bbox(sizes, lowest, highest) -> None:
    lbs, ubs = box_bounds(*sizes)
    assert lbs.tolist() == lowest and ubs.tolist() == highest


def test_ignore_label_rules_for_choose_box() -> None:
    annotated = (-1, 0, 1, 2)
    rng = np.random.default_rng(0)
    locations = {1: np.zeros((0, 3), np.int32), annotated: np.array([[5, 20, 20]], np.int32)}
    # unforced with an ignore label: centred on an annotated voxel, not random
    boxes = {
        choose_box((10, 40, 40), (4, 8, 8), (4, 8, 8), False, locations, rng) for _ in range(5)
    }
    assert boxes == {(3, 16, 16)}
    # forced, no foreground class present: the annotated key is the last resort
    assert choose_box((10, 40, 40), (4, 8, 8), (4, 8, 8), True, locations, rng) == (3, 16, 16)
    # forced with a foreground class present: never the annotated key
    locations[1] = np.array([[1, 2, 3]], np.int32)
    for _ in range(5):
        assert choose_box((10, 40, 40), (4, 8, 8), (4, 8, 8), True, locations, rng) == (0, 0, 0)


def test_forced_samples_contain_foreground(store3d: CaseStore) -> None:
    loader = PatchLoader(store3d, 12, (2, 4, 4), (4, 8, 8), transform=CenterCrop((2, 4, 4)))
    forced, free = [], []
    for k in range(25):
        foreground = _has_foreground(loader(0, k)["target"])
        forced += list(foreground[8:])
        free += list(foreground[:8])
    assert np.mean(forced) >= 0.95
    assert np.mean(free) < 0.8  # the patch is small: forcing is what puts foreground in it


def test_explicit_forced_positions_override_the_rule(store3d: CaseStore) -> None:
    loader = PatchLoader(store3d, 2, (2, 4, 4), forced_positions=[True, False])
    foreground = np.array([_has_foreground(loader(0, k)["target"]) for k in range(40)])
    assert foreground[:, 0].mean() >= 0.95 and foreground[:, 1].mean() < 0.8
    with pytest.raises(ConfigurationError, match="forced_positions has 3 entries"):
        PatchLoader(store3d, 2, (2, 4, 4), forced_positions=[True, False, True])


def test_same_seed_same_batches_and_different_seed_differs(store3d: CaseStore) -> None:
    make = lambda seed: PatchLoader(store3d, 4, (4, 8, 8), seed=seed)  # noqa: E731
    a, b, c = make(5), make(5), make(6)
    for k in range(3):
        assert _equal(a(2, k), b(2, k))
    assert not all(_equal(a(2, k), c(2, k)) for k in range(3))
    assert not _equal(a(2, 0), a(2, 1)) and not _equal(a(2, 0), a(3, 0))


def test_real_augmentation_pipeline_batches(preprocessed: Path, store3d: CaseStore) -> None:
    conf = _config(preprocessed, "3d_fullres")
    patch = conf["patch_size"]
    aug = configure_augmentation(patch)
    transform = training_transforms(patch, aug.rotation, aug.do_dummy_2d, aug.mirror_axes)
    scales = deep_supervision_scales(conf["architecture"]["arch_kwargs"]["strides"])
    loader = PatchLoader(
        store3d, 2, patch, aug.initial_patch_size, transform=transform, ds_scales=scales
    )
    batch = loader(0, 0)
    assert batch["data"].shape == (2, 1, *patch) and batch["data"].dtype == torch.float32
    expected = [tuple(round(p * s) for p, s in zip(patch, scale, strict=True)) for scale in scales]
    assert [tuple(t.shape) for t in batch["target"]] == [(2, 1, *e) for e in expected]
    assert all(int(t.min()) >= 0 for t in batch["target"])  # -1 padding became background
    assert _equal(batch, loader(0, 0))  # augmentation draws only from the sample's generator


@pytest.mark.parametrize("name", ["3d_fullres", "2d"])
def test_reading_the_drawn_region_gives_the_whole_crops_sample(preprocessed: Path, name) -> None:
    """The loader reads only the part of the initial patch that the drawn spatial transform
    needs: every sample equals the transform applied to the whole initial-patch crop (up to
    float32 rounding of a resampled patch; near-tied labels in at most a thousandth)."""
    conf = _config(preprocessed, name)
    patch = conf["patch_size"]
    aug = configure_augmentation(patch)
    transform = training_transforms(patch, aug.rotation, aug.do_dummy_2d, aug.mirror_axes)
    store = CaseStore(preprocessed / conf["data_identifier"])
    loader = PatchLoader(store, 2, patch, aug.initial_patch_size, transform=transform)
    for iteration in range(8):
        for j in range(2):
            case_id, x, s = loader.sample(0, iteration, j)
            key, data, seg, rng = loader.crop_sample(0, iteration, j)
            x_ref, s_ref = transform(data, seg, rng)
            assert case_id == key and x.shape == x_ref.shape and s.dtype == s_ref.dtype
            np.testing.assert_allclose(x, x_ref, atol=1e-3)  # the rotation's float32 mosaic
            assert np.mean(s != s_ref) <= 1e-3


def test_2d_configuration_gives_2d_batches(preprocessed: Path, store2d: CaseStore) -> None:
    patch = tuple(_config(preprocessed, "2d")["patch_size"])
    batch = validation_loader(store2d, 3, patch)(0, 0)
    assert batch["data"].shape == (3, 1, *patch) and batch["target"].shape == (3, 1, *patch)
    assert int(batch["target"].min()) >= 0
    small = PatchLoader(store2d, 12, (6, 6))
    forced = np.concatenate([_has_foreground(small(0, k)["target"])[8:] for k in range(15)])
    assert forced.mean() >= 0.95  # the forced voxel's slice is the one read


def test_deep_supervision_targets_are_nearest_downsampled(store3d: CaseStore) -> None:
    scales = [[1.0, 1.0, 1.0], [1.0, 0.5, 0.5], [0.5, 0.25, 0.25]]
    batch = PatchLoader(store3d, 2, (4, 8, 8), ds_scales=scales)(0, 0)
    shapes = [tuple(t.shape) for t in batch["target"]]
    assert shapes == [(2, 1, 4, 8, 8), (2, 1, 4, 4, 4), (2, 1, 2, 2, 2)]
    full, half = batch["target"][0], batch["target"][1]
    assert set(half.unique().tolist()) <= set(full.unique().tolist())


def test_stream_order_is_independent_of_workers_and_history(store3d: CaseStore) -> None:
    loader = PatchLoader(store3d, 2, (4, 8, 8), seed=1)
    with BatchStream(loader, 2, prefetch=4, iterations_per_epoch=3) as stream:
        parallel = [next(stream) for _ in range(7)]
        assert stream.next_position == (2, 1)
    with BatchStream(loader, 0, iterations_per_epoch=3) as stream:
        serial = [next(stream) for _ in range(7)]
    positions = [(t // 3, t % 3) for t in range(7)]
    fresh = PatchLoader(store3d, 2, (4, 8, 8), seed=1)  # nothing drawn before, reverse order
    direct = {p: fresh(*p) for p in reversed(positions)}
    for p, x, y in zip(positions, parallel, serial, strict=True):
        assert _equal(x, y) and _equal(x, direct[p])
    with BatchStream(loader, 2, iterations_per_epoch=3, start_epoch=2) as resumed:
        assert _equal(next(resumed), parallel[6])  # a resumed run sees batch (2, 0) unchanged
    assert not mp.active_children()


def test_worker_error_names_the_case_and_leaves_no_process(store3d: CaseStore) -> None:
    def explode(_data, _seg, _rng):
        raise RuntimeError("broken transform")

    good = PatchLoader(store3d, 2, (4, 8, 8))
    bad = PatchLoader(store3d, 2, (4, 8, 8), transform=explode)
    with pytest.raises(SampleError, match=r"case synth_\d+ \(epoch 0, iteration 0, sample 0\)"):
        bad(0, 0)

    def flaky(epoch: int, iteration: int) -> dict:
        return (bad if iteration == 2 else good)(epoch, iteration)

    for workers in (0, 2):
        stream = BatchStream(flaky, workers, iterations_per_epoch=5)
        next(stream), next(stream)  # batches built before the failure still arrive intact
        with pytest.raises(WorkerError, match=r"epoch 0 iteration 2: SampleError: case synth_\d+"):
            next(stream)
        stream.close()
    assert not mp.active_children()


def test_dead_worker_is_reported_not_waited_for() -> None:
    def die(_epoch: int, iteration: int) -> dict:
        if iteration == 1:
            os._exit(3)
        return {"data": torch.zeros(1)}

    with BatchStream(die, 2, iterations_per_epoch=10) as stream:
        next(stream)
        with pytest.raises(WorkerError, match=r"worker 1 died \(exit code 3\).*iteration 1"):
            next(stream)
    assert not mp.active_children()


def test_default_num_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("nnUNet_n_proc_DA", "3")
    assert default_num_workers() == 3
    monkeypatch.delenv("nnUNet_n_proc_DA")
    assert 1 <= default_num_workers() <= 12


# ----------------------------------------------------------------- a cascade stage's previous seg
@pytest.fixture(scope="module")
def cascade_store(preprocessed: Path, store3d: CaseStore, tmp_path_factory) -> CaseStore:
    """The 3d_fullres cases with random previous-stage segmentations (uint8, 3-D, the data's
    shape), as a 3d_lowres fold's validation writes them."""
    folder = tmp_path_factory.mktemp("predicted_next_stage")
    rng = np.random.default_rng(0)
    labels = _foreground_labels(preprocessed)
    for case_id in store3d.case_ids:
        shape = store3d.case(case_id).shape
        previous = rng.choice([0, *labels], size=shape).astype(np.uint8)
        save_array(previous, folder / f"{case_id}.b2nd", shape, shape)
    return CaseStore(store3d.folder, previous_stage_folder=folder)


def _foreground_labels(preprocessed: Path) -> list[int]:
    return list(load_dataset_json(preprocessed / "dataset.json").label_spec.foreground_labels)


def test_cascade_crop_stacks_the_previous_stage_padded_like_the_seg(
    preprocessed: Path, cascade_store: CaseStore
) -> None:
    patch = _config(preprocessed, "3d_fullres")["patch_size"]
    big = [p + 20 for p in patch]  # larger than the case: padding on every side
    loader = PatchLoader(cascade_store, 2, big)
    case_id, data, seg, _ = loader.crop_sample(0, 0, 0)
    case = cascade_store.case(case_id)
    assert seg.shape == (2, *big) and seg.dtype == np.int16 and data.shape[0] == 1
    lower = [int(v) for v in np.argwhere(data[0] != 0).min(axis=0)]  # data is nonzero inside
    inside = tuple(slice(lo, lo + s) for lo, s in zip(lower, case.shape, strict=True))
    assert np.array_equal(data[0][inside], case.data[0])  # the box found from the data is right
    assert np.array_equal(seg[1][inside], case.previous[:])  # the same box as the target
    outside = np.ones(big, dtype=bool)
    outside[inside] = False
    assert (seg[1][outside] == -1).all()  # upstream pads the previous stage with -1 too


def test_cascade_batches_have_image_plus_foreground_channels(
    preprocessed: Path, cascade_store: CaseStore
) -> None:
    conf = _config(preprocessed, "3d_fullres")
    patch, labels = conf["patch_size"], _foreground_labels(preprocessed)
    aug = configure_augmentation(patch)
    transform = training_transforms(
        patch, aug.rotation, aug.do_dummy_2d, aug.mirror_axes, cascade_labels=labels
    )
    train = PatchLoader(cascade_store, 2, patch, aug.initial_patch_size, transform=transform)
    batch = train(0, 0)
    assert batch["data"].shape == (2, 1 + len(labels), *patch) and batch["target"].shape[1] == 1
    assert set(np.unique(batch["data"][:, 1:].numpy())) <= {0.0, 1.0}
    assert _equal(batch, train(0, 0))  # the cascade's perturbations draw from the sample's rng

    val = validation_loader(cascade_store, 2, patch, transform=ValidationTransforms(labels))
    batch = val(3, 1)
    for j in range(2):  # one-hot of exactly the cropped previous stage (-1 padding: none)
        _, _, seg, _ = val.crop_sample(3, 1, j)
        for channel, label in enumerate(labels, 1):
            expected = (seg[1] == label).astype(np.float32)
            assert np.array_equal(batch["data"][j, channel].numpy(), expected)
        target = np.where(seg[:1] == -1, 0, seg[:1])
        assert np.array_equal(batch["target"][j].numpy(), target)
