"""Export: logits in preprocessed space -> files with the input's exact geometry and voxels."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.dataset.discovery import RawCase
from nnunet_core.inference.export import (
    export_prediction,
    probabilities_to_segmentation,
    resample_logits_to_original,
)
from nnunet_core.io.atomic import read_json
from nnunet_core.io.dataset_json import parse_dataset_json, parse_labels
from nnunet_core.io.images import read_images
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.preprocessing.preprocessor import run_case

NO_PLANS = Plans({"configurations": {}})  # identity transposes, the default reader
LABELS = parse_labels({"labels": {"background": 0, "a": 1, "b": 2}})
REGIONS = parse_labels(
    {"labels": {"background": 0, "whole": [1, 2], "core": [2]}, "regions_class_order": [1, 2]}
)
C, S = math.cos(0.5), math.sin(0.5)
DIRECTION = (C, -S, 0.0, S, C, 0.0, 0.0, 0.0, 1.0)
ORIGIN = (10.5, -4.25, 3.0)
ITK_SPACING = (0.7, 0.9, 3.0)  # (x, y, z); nnU-Net order (z, y, x) = (3.0, 0.9, 0.7)


def _raw_image(path: Path, shape_zyx: tuple[int, int, int]) -> sitk.Image:
    rng = np.random.default_rng(0)
    array = rng.normal(100, 20, shape_zyx).astype(np.float32)
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(ITK_SPACING)
    image.SetOrigin(ORIGIN)
    image.SetDirection(DIRECTION)
    sitk.WriteImage(image, str(path))
    return sitk.ReadImage(str(path))  # NIfTI keeps float32 geometry: compare with the file


def _assert_same_geometry(written: sitk.Image, raw: sitk.Image) -> None:
    assert written.GetSize() == raw.GetSize()
    assert written.GetSpacing() == raw.GetSpacing()
    assert written.GetOrigin() == raw.GetOrigin()
    assert written.GetDirection() == raw.GetDirection()


def _one_hot_logits(labels: np.ndarray, num_classes: int) -> np.ndarray:
    return (np.eye(num_classes, dtype=np.float32)[labels] * 8.0 - 4.0).transpose(3, 0, 1, 2)


def _fake_preprocessing(path: Path, transpose: list[int], bbox: list[list[int]]) -> dict:
    """What preprocessing records for a case: crop bbox and shapes in transposed order."""
    data, properties = read_images([path])
    shape = [data.shape[1:][a] for a in transpose]
    properties.update(
        shape_before_cropping=shape,
        bbox_used_for_cropping=bbox,
        shape_after_cropping_and_before_resampling=[hi - lo for lo, hi in bbox],
    )
    return properties


def test_export_restores_geometry_crop_and_transpose(tmp_path: Path) -> None:
    raw = _raw_image(tmp_path / "case_0000.nii.gz", (10, 16, 20))
    transpose = [2, 0, 1]  # preprocessed axes (x, z, y)
    plans = Plans(
        {"configurations": {}, "transpose_forward": transpose, "transpose_backward": [1, 2, 0]}
    )
    bbox = [[2, 18], [1, 9], [3, 14]]
    properties = _fake_preprocessing(tmp_path / "case_0000.nii.gz", transpose, bbox)
    # network spacing = original transposed spacing: nothing to resample
    configuration = Configuration("3d_fullres", {"spacing": [0.7, 3.0, 0.9]})
    labels = np.random.default_rng(1).integers(0, 3, (16, 8, 11))
    out = export_prediction(
        _one_hot_logits(labels, 3),
        properties,
        plans,
        configuration,
        LABELS,
        tmp_path / "out" / "case",
        ".nii.gz",
        save_probabilities=True,
    )
    assert out == tmp_path / "out" / "case.nii.gz"
    written = sitk.ReadImage(str(out))
    _assert_same_geometry(written, raw)
    expected = np.zeros((20, 10, 16), dtype=np.uint8)
    expected[2:18, 1:9, 3:14] = labels
    seg = sitk.GetArrayFromImage(written)
    np.testing.assert_array_equal(seg, expected.transpose(1, 2, 0))

    probabilities = np.load(tmp_path / "out" / "case.npz")["probabilities"]
    assert probabilities.dtype == np.float32 and probabilities.shape == (3, 10, 16, 20)
    np.testing.assert_allclose(probabilities.sum(0), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(probabilities.argmax(0), seg)
    assert (probabilities[0][seg == 0] > 0.99).all()  # incl. background 1 outside the bbox
    saved = read_json(tmp_path / "out" / "case.json")
    assert saved["bbox_used_for_cropping"] == bbox
    assert saved["sitk_stuff"]["direction"] == list(raw.GetDirection())
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "case.json",
        "case.nii.gz",
        "case.npz",
    ]


def test_resampling_back_to_original_spacing() -> None:
    """Coarser network spacing in-plane: order-1 upsampling puts a block where it belongs."""
    properties = {
        "spacing": [3.0, 0.5, 0.5],
        "shape_after_cropping_and_before_resampling": [6, 24, 24],
    }
    configuration = {
        "spacing": [3.0, 1.0, 1.0],
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {
            "is_seg": False,
            "order": 1,
            "order_z": 0,
            "force_separate_z": None,
        },
    }
    labels = np.zeros((6, 12, 12), dtype=int)
    labels[:, 3:9, 3:9] = 1
    logits = _one_hot_logits(labels, 2)
    resampled = resample_logits_to_original(
        logits, properties, NO_PLANS, Configuration("3d_fullres", configuration)
    )
    assert resampled.shape == (2, 6, 24, 24) and resampled.dtype == np.float32
    assert not np.shares_memory(resampled, logits)
    seg = resampled.argmax(0)
    assert (seg[:, 7:17, 7:17] == 1).all()
    assert seg[:, :5].sum() == 0 and seg[:, 19:].sum() == 0 and seg[:, :, :5].sum() == 0


def test_2d_configuration_uses_the_case_slice_spacing() -> None:
    properties = {
        "spacing": [4.0, 1.0, 1.0],
        "shape_after_cropping_and_before_resampling": [3, 10, 8],
    }
    logits = np.zeros((2, 3, 5, 4), dtype=np.float32)
    resampled = resample_logits_to_original(
        logits, properties, NO_PLANS, Configuration("2d", {"spacing": [2.0, 2.0]})
    )
    assert resampled.shape == (2, 3, 10, 8)


def test_region_painting_order() -> None:
    # channel 0 = whole (1, 2) painted as 1, channel 1 = core (2) painted as 2 on top
    probabilities = np.array([[0.9, 0.9, 0.2, 0.5], [0.1, 0.7, 0.8, 0.9]], dtype=np.float32)
    seg = probabilities_to_segmentation(probabilities[:, None, None, :], REGIONS)
    np.testing.assert_array_equal(seg.ravel(), [1, 2, 2, 2])


def test_export_regions_with_probabilities(tmp_path: Path) -> None:
    raw = _raw_image(tmp_path / "r_0000.nii.gz", (4, 6, 5))
    bbox = [[1, 3], [0, 6], [1, 4]]
    properties = _fake_preprocessing(tmp_path / "r_0000.nii.gz", [0, 1, 2], bbox)
    logits = np.full((2, 2, 6, 3), -5.0, dtype=np.float32)
    logits[0, 0] = 5.0  # whole only -> 1
    logits[:, 1, :2] = 5.0  # whole and core -> 2
    out = export_prediction(
        logits,
        properties,
        NO_PLANS,
        Configuration("test", {"spacing": [3.0, 0.9, 0.7]}),
        REGIONS,
        tmp_path / "r",
        ".nii.gz",
        True,
    )
    written = sitk.ReadImage(str(out))
    _assert_same_geometry(written, raw)
    expected = np.zeros((4, 6, 5), dtype=np.uint8)
    expected[1, :, 1:4] = 1
    expected[2, :2, 1:4] = 2
    np.testing.assert_array_equal(sitk.GetArrayFromImage(written), expected)
    probabilities = np.load(tmp_path / "r.npz")["probabilities"]
    assert probabilities.shape == (2, 4, 6, 5)
    assert (probabilities[:, 0] == 0).all()  # regions: zeros outside the bbox


def test_export_2d_image(tmp_path: Path) -> None:
    image = sitk.GetImageFromArray(np.ones((7, 9), dtype=np.float32))
    image.SetSpacing((0.5, 0.8))
    image.SetOrigin((2.0, 3.0))
    image.SetDirection((0.0, 1.0, 1.0, 0.0))
    sitk.WriteImage(image, str(tmp_path / "flat_0000.nii.gz"))
    image = sitk.ReadImage(str(tmp_path / "flat_0000.nii.gz"))
    properties = _fake_preprocessing(
        tmp_path / "flat_0000.nii.gz", [0, 1, 2], [[0, 1], [0, 7], [0, 9]]
    )
    labels = np.zeros((1, 7, 9), dtype=int)
    labels[0, 2:5, 3:6] = 2
    out = export_prediction(
        _one_hot_logits(labels, 3),
        properties,
        NO_PLANS,
        Configuration("test", {"spacing": [0.8, 0.5]}),
        LABELS,
        tmp_path / "flat",
        ".nii.gz",
    )
    written = sitk.ReadImage(str(out))
    _assert_same_geometry(written, image)
    np.testing.assert_array_equal(sitk.GetArrayFromImage(written), labels[0])
    assert not (tmp_path / "flat.npz").exists()


def test_round_trip_through_real_preprocessing(tmp_path: Path) -> None:
    """run_case on a test case (no label), logits from the preprocessed data, export back."""
    array = np.zeros((10, 16, 20), dtype=np.float32)
    array[2:9, 3:14, 4:17] = 50.0  # body; outside stays 0, so the case is cropped
    array[4:7, 6:11, 8:14] = 200.0  # "organ"
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(ITK_SPACING)
    image.SetOrigin(ORIGIN)
    image.SetDirection(DIRECTION)
    sitk.WriteImage(image, str(tmp_path / "t_0000.nii.gz"))
    image = sitk.ReadImage(str(tmp_path / "t_0000.nii.gz"))
    dataset_json = parse_dataset_json(
        {
            "channel_names": {"0": "MR"},
            "labels": {"background": 0, "organ": 1},
            "numTraining": 0,
            "file_ending": ".nii.gz",
        }
    )
    plans = {
        "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "configurations": {
            "3d_fullres": {
                "data_identifier": "d",
                "spacing": [3.0, 1.8, 1.4],
                "patch_size": [8, 8, 8],
                "normalization_schemes": ["ZScoreNormalization"],
                "use_mask_for_norm": [False],
                "resampling_fn_probabilities_kwargs": {
                    "is_seg": False,
                    "order": 1,
                    "order_z": 0,
                    "force_separate_z": None,
                },
            }
        },
    }
    case = RawCase("t", (tmp_path / "t_0000.nii.gz",), None)
    data, seg, properties = run_case(case, Plans(plans), "3d_fullres", dataset_json)
    assert seg is None
    assert properties["bbox_used_for_cropping"] == [[2, 9], [3, 14], [4, 17]]
    organ = (data[0] > data[0].mean() + data[0].std()).astype(np.float32)
    logits = np.stack([1.0 - organ, organ]) * 6.0
    out = export_prediction(
        logits,
        properties,
        Plans(plans),
        Plans(plans).configuration("3d_fullres"),
        dataset_json.label_spec,
        tmp_path / "t",
        ".nii.gz",
    )
    written = sitk.ReadImage(str(out))
    _assert_same_geometry(written, image)
    seg = sitk.GetArrayFromImage(written)
    assert seg.shape == array.shape and seg[array == 0].sum() == 0
    assert (seg[5, 7:10, 9:13] == 1).all()  # the organ's core survives down- and upsampling
    assert seg[array == 50].mean() < 0.1


@pytest.mark.parametrize("bad", [[[0, 5], [0, 8], [0, 11]], [[0, 16], [0, 8]]])
def test_bbox_mismatch_is_an_error(tmp_path: Path, bad: list[list[int]]) -> None:
    properties = {
        "spacing": [1.0, 1.0, 1.0],
        "shape_before_cropping": [16, 8, 11],
        "bbox_used_for_cropping": bad,
        "shape_after_cropping_and_before_resampling": [16, 8, 11],
        "sitk_stuff": {
            "spacing": [1.0] * 3,
            "origin": [0.0] * 3,
            "direction": list(np.eye(3).ravel()),
        },
    }
    with pytest.raises(Exception, match="bbox|does not fit"):
        export_prediction(
            np.zeros((3, 16, 8, 11), np.float32),
            properties,
            NO_PLANS,
            Configuration("test", {"spacing": [1, 1, 1]}),
            LABELS,
            tmp_path / "x",
            ".nii.gz",
        )
    assert not list(tmp_path.iterdir())
