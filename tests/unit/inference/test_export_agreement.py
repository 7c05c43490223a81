"""The slab-wise torch export agrees with the reference export (scipy, whole arrays).

The reference is the export as it was before slabs: ``resample_logits_to_original`` (scipy in
float64, upstream's arithmetic), softmax/sigmoid, argmax or region painting, crop reverted,
transposed back. Seeded cases cover the paths a plans file can take: anisotropic (separate z,
order 0 along it), isotropic (trilinear), a transposed and cropped case, regions, float16 logits
(upstream's sliding window), and an order-3 plans file (the reference path, cut into slabs).
Segmentations must agree on >= 99.9 % of voxels, probabilities within the stated tolerance.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from scipy.ndimage import gaussian_filter

from nnunet_core.inference.export import (
    apply_inference_nonlin,
    export_prediction,
    probabilities_to_segmentation,
    resample_logits_to_original,
    revert_cropping,
)
from nnunet_core.io.dataset_json import parse_labels
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration

LABELS = parse_labels({"labels": {"background": 0, "organ": 1, "lesion": 2}})
REGIONS = parse_labels(
    {"labels": {"background": 0, "whole": [1, 2], "core": [2]}, "regions_class_order": [1, 2]}
)
MIN_AGREEMENT = 0.999
# float32: torch's float32 arithmetic; float16 logits take scipy's float64 path, as upstream
PROBABILITY_TOLERANCE = {np.float32: 2e-6, np.float16: 2e-6}


def _reference(logits, properties, plans, configuration, label_spec, save_probabilities):
    """Today's export arithmetic on whole arrays: (segmentation, probabilities or None)."""
    resampled = resample_logits_to_original(logits, properties, plans, configuration)
    backward = list(plans.transpose_backward)
    bbox, shape = properties["bbox_used_for_cropping"], properties["shape_before_cropping"]
    probabilities = apply_inference_nonlin(resampled, label_spec)
    segmentation = probabilities_to_segmentation(probabilities, label_spec)
    segmentation = revert_cropping(segmentation, bbox, shape).transpose(backward)
    if not save_probabilities:
        return segmentation, None
    fill = None if label_spec.has_regions else 1.0
    full = revert_cropping(probabilities, bbox, shape, fill)
    return segmentation, full.transpose([0, *(a + 1 for a in backward)])


def _case(seed: int, shape_zyx, spacing_zyx, transpose, bbox):
    """A seeded generator and the properties of a cropped case (the written image's too)."""
    rng = np.random.default_rng(seed)
    cropped = [hi - lo for lo, hi in bbox]
    shape_before = [shape_zyx[a] for a in transpose]
    assert all(hi <= n for (_, hi), n in zip(bbox, shape_before, strict=True))
    properties = {
        "spacing": list(spacing_zyx),
        "shape_before_cropping": shape_before,
        "bbox_used_for_cropping": bbox,
        "shape_after_cropping_and_before_resampling": cropped,
        "sitk_stuff": {
            "spacing": list(spacing_zyx[::-1]),
            "origin": [0.0, 0.0, 0.0],
            "direction": list(np.eye(3).ravel()),
        },
    }
    return rng, properties


def _logits(rng, shape, channels: int, dtype) -> np.ndarray:
    noise = rng.normal(0, 1, (channels, *shape))
    smooth = np.stack([gaussian_filter(n, 1.5) for n in noise]) * 6.0
    return smooth.astype(dtype)


PROB_KWARGS = {"is_seg": False, "order": 1, "order_z": 0, "force_separate_z": None}
CASES = {
    # CT-like: 2.5 mm slices vs 0.7 mm in-plane, network spacing of another case (separate z)
    "anisotropic": dict(shape=(23, 61, 57), spacing=(2.3, 0.66, 0.66), net=(2.5, 0.7, 0.7),
                        transpose=[0, 1, 2], bbox=[[1, 21], [3, 60], [0, 57]], kwargs=PROB_KWARGS),
    # MR-like isotropic: trilinear in 3-D, transposed axes, cropped on every side
    "isotropic": dict(shape=(30, 34, 28), spacing=(1.1, 0.95, 1.0), net=(1.0, 1.0, 1.0),
                      transpose=[2, 0, 1], bbox=[[2, 26], [1, 29], [3, 31]], kwargs=PROB_KWARGS),
    # order_z 1 along the separate axis (linear there too)
    "order_z_1": dict(shape=(13, 40, 44), spacing=(3.3, 0.8, 0.8), net=(2.9, 0.9, 0.9),
                      transpose=[0, 1, 2], bbox=[[0, 13], [2, 38], [1, 44]],
                      kwargs={**PROB_KWARGS, "order_z": 1}),
    # order 3: not a linear tensor product, the reference path cut into slabs
    "order_3": dict(shape=(12, 30, 26), spacing=(1.0, 1.0, 1.0), net=(1.2, 1.1, 1.0),
                    transpose=[0, 1, 2], bbox=[[0, 12], [0, 30], [0, 26]],
                    kwargs={**PROB_KWARGS, "order": 3}),
}  # fmt: skip


def _run(tmp_path: Path, name: str, label_spec, dtype, save_probabilities: bool, seed: int):
    case = CASES[name]
    rng, properties = _case(seed, case["shape"], case["spacing"], case["transpose"], case["bbox"])
    transpose = case["transpose"]
    backward = list(np.argsort(transpose))
    plans = Plans({"configurations": {}, "transpose_forward": transpose,
                   "transpose_backward": backward})  # fmt: skip
    configuration = Configuration("3d_fullres", {
        "spacing": [case["net"][a] for a in transpose],
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": case["kwargs"],
    })  # fmt: skip
    cropped = properties["shape_after_cropping_and_before_resampling"]
    spacing_t = [case["spacing"][a] for a in transpose]
    network_spacing = configuration.spacing
    network_shape = [
        round(n * s / t) for n, s, t in zip(cropped, spacing_t, network_spacing, strict=True)
    ]
    channels = 2 if label_spec.has_regions else 3
    logits = _logits(rng, network_shape, channels, dtype)
    expected_seg, expected_prob = _reference(
        logits, properties, plans, configuration, label_spec, save_probabilities
    )
    out = export_prediction(logits, properties, plans, configuration, label_spec,
                            tmp_path / name, ".nii.gz", save_probabilities)  # fmt: skip
    segmentation = sitk.GetArrayFromImage(sitk.ReadImage(str(out)))
    assert segmentation.shape == expected_seg.shape
    agreement = float((segmentation == expected_seg).mean())
    assert agreement >= MIN_AGREEMENT, f"{name}: {agreement:.5f} of voxels agree"
    if save_probabilities:
        probabilities = np.load(tmp_path / f"{name}.npz")["probabilities"]
        assert probabilities.dtype == np.float32 and probabilities.shape == expected_prob.shape
        difference = np.abs(probabilities - expected_prob).max()
        assert difference <= PROBABILITY_TOLERANCE[dtype], f"{name}: {difference}"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    return agreement


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("save_probabilities", [False, True])
def test_labels_agree_with_the_reference(tmp_path: Path, name: str, save_probabilities: bool):
    _run(tmp_path, name, LABELS, np.float32, save_probabilities, seed=len(name))


@pytest.mark.parametrize("name", ["anisotropic", "isotropic"])
def test_regions_agree_with_the_reference(tmp_path: Path, name: str):
    _run(tmp_path, name, REGIONS, np.float32, True, seed=7)


@pytest.mark.parametrize("name", ["anisotropic", "isotropic"])
def test_float16_logits_agree_with_the_reference(tmp_path: Path, name: str):
    _run(tmp_path, name, LABELS, np.float16, True, seed=11)


def test_slabs_of_one_row_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The slab height does not matter: one output row per slab gives the same files."""
    from nnunet_core.inference import resample_slabs

    monkeypatch.setattr(resample_slabs, "SLAB_VALUES", 1)
    _run(tmp_path, "isotropic", LABELS, np.float32, True, seed=3)
