"""Cascade prediction: `predict -c 3d_cascade_fullres`, with and without -prev_stage_predictions.

A tiny synthetic dataset planned with a small GPU memory target gets 3d_lowres and
3d_cascade_fullres. Their model folders are made without training (training is not what is
tested): plans.json, dataset.json and ``fold_0/checkpoint_final.pth`` with seeded random weights
of a tiny architecture, the cascade's network built for the image channels plus one one-hot
channel per foreground label. Random weights cost the same and depend on every input channel, so
a different previous-stage segmentation changes the probabilities.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import torch

from nnunet_core.cli import main
from nnunet_core.dataset.discovery import RawCase
from nnunet_core.inference.cascade import preprocess_case, with_previous_stage
from nnunet_core.inference.cascade_input import (
    cascade_input,
    num_input_channels,
    one_hot_foreground,
)
from nnunet_core.inference.model_folder import load_trained_model
from nnunet_core.inference.predictor import PredictionSettings, input_cases, predict_cases
from nnunet_core.io.dataset_json import parse_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.model import build_network
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.preprocessing.cropping import crop_to_nonzero
from nnunet_core.preprocessing.preprocessor import run_case
from nnunet_core.preprocessing.resampling import (
    compute_new_shape,
    plan_resampling,
    resample,
    resampling_kwargs,
)
from tests.helpers.training import roots_env

pytestmark = pytest.mark.slow

DATASET = "Dataset992_CascPred"
LOW, CASCADE = "3d_lowres", "3d_cascade_fullres"
CASES = ("synth_t000", "synth_t001")
TINY_ARCH = {
    "n_stages": 3,
    "features_per_stage": [4, 8, 16],
    "kernel_sizes": [[3, 3, 3]] * 3,
    "strides": [[1, 1, 1], [2, 2, 2], [2, 2, 2]],
    "n_conv_per_stage": [1, 1, 1],
    "n_conv_per_stage_decoder": [1, 1],
}
FAST = ["-f", "0", "-device", "cpu", "-npp", "0", "-nps", "0", "--disable_tta"]


def tiny_plans(plans: dict) -> dict:
    """The planned spacings and cascade links with a tiny network and patch (fast on a CPU)."""
    for name in (LOW, "3d_fullres"):
        configuration = plans["configurations"][name]
        configuration["patch_size"] = [16, 16, 16]
        configuration["architecture"]["arch_kwargs"].update(TINY_ARCH)
    return plans


def make_model(results: Path, plans: dict, dataset_json: dict, configuration: str) -> Path:
    """A model folder as training writes it, fold 0 with seeded random weights."""
    resolved = Plans(plans).configuration(configuration)
    spec = parse_dataset_json(dataset_json).label_spec
    channels = num_input_channels(resolved, len(dataset_json["channel_names"]), spec)
    model_dir = results / DATASET / f"nnUNetTrainer__nnUNetPlans__{configuration}"
    model_dir.mkdir(parents=True)
    (model_dir / "plans.json").write_text(json.dumps(plans))
    (model_dir / "dataset.json").write_text(json.dumps(dataset_json))
    torch.manual_seed(7)
    network = build_network(resolved, channels, spec.num_segmentation_heads, True)
    state = {
        "network_weights": network.state_dict(),
        "init_args": {"configuration": configuration, "fold": 0, "device": "cpu"},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": [0, 1, 2],
        "current_epoch": 1,
    }
    ckpt.save_checkpoint(state, model_dir / "fold_0" / ckpt.FINAL)
    return model_dir


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    root = tmp_path_factory.mktemp("cascade_predict")
    raw = make_raw_dataset(
        root / "raw" / DATASET,
        num_training=5,
        num_test=2,
        shape=(40, 48, 48),
        spacing=(1.0, 1.0, 1.0),
    )
    env = roots_env(root)
    # the real commands in process: two interpreter start-ups importing torch cost seconds
    roots = ["--raw", env["nnUNet_raw"], "--preprocessed", env["nnUNet_preprocessed"]]
    assert main(["fingerprint", "-d", DATASET, "-np", "1", *roots]) == 0
    assert main(["plan", "-d", DATASET, "-gpu_memory_target", "0.02", *roots]) == 0
    plans = json.loads((root / "preprocessed" / DATASET / "nnUNetPlans.json").read_text())
    assert plans["configurations"][LOW]["next_stage"] == CASCADE
    plans = tiny_plans(plans)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    models = {c: make_model(root / "results", plans, dataset_json, c) for c in (LOW, CASCADE)}
    return {"root": root, "images": raw / "imagesTs", "env": env, "models": models}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """In-process predictions use one torch thread (2 shared cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def predict(tree: dict, output: Path, configuration: str, *extra: str) -> int:
    args = ["predict", "-i", str(tree["images"]), "-o", str(output), "-d", DATASET]
    roots = ["--results", tree["env"]["nnUNet_results"]]
    return main([*args, "-c", configuration, *FAST, *roots, *extra])


def geometry(path: Path) -> tuple:
    image = sitk.ReadImage(str(path))
    return image.GetSize(), image.GetSpacing(), image.GetOrigin(), image.GetDirection()


def segmentation(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


@pytest.fixture(scope="module")
def with_flag(tree: dict) -> dict[str, Path]:
    """(a): 3d_lowres into a folder, then the cascade reading it."""
    low, out = tree["root"] / "low", tree["root"] / "cascade_a"
    assert predict(tree, low, LOW) == 0
    assert (
        predict(tree, out, CASCADE, "-prev_stage_predictions", str(low), "--save_probabilities")
        == 0
    )
    return {"low": low, "out": out}


def test_cascade_with_previous_stage_folder_has_the_input_geometry(
    tree: dict, with_flag: dict[str, Path]
) -> None:
    for case in CASES:
        image = tree["images"] / f"{case}_0000.nii.gz"
        predicted = with_flag["out"] / f"{case}.nii.gz"
        assert geometry(predicted) == geometry(image)
        probabilities = np.load(with_flag["out"] / f"{case}.npz")["probabilities"]
        assert np.allclose(probabilities.sum(0), 1, atol=1e-3)
    args = json.loads((with_flag["out"] / "predict_from_raw_data_args.json").read_text())
    assert args["prev_stage_predictions"] == str(with_flag["low"])


def test_cascade_without_the_flag_predicts_the_previous_stage_first(
    tree: dict, with_flag: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    """(b) through predict-from-modelfolder: the sibling 3d_lowres folder is found."""
    out = tree["root"] / "cascade_b"
    args = ["predict-from-modelfolder", "-i", str(tree["images"]), "-o", str(out)]
    model = str(tree["models"][CASCADE])
    assert main([*args, "-m", model, *FAST, "--save_probabilities"]) == 0
    log = capsys.readouterr().out
    assert f"predicting its previous stage {LOW} first into {out / 'prediction_3d_lowres'}" in log
    for case in CASES:
        low = segmentation(with_flag["low"] / f"{case}.nii.gz")
        assert np.array_equal(segmentation(out / "prediction_3d_lowres" / f"{case}.nii.gz"), low)
        a = np.load(with_flag["out"] / f"{case}.npz")["probabilities"]
        b = np.load(out / f"{case}.npz")["probabilities"]
        assert np.array_equal(a, b)
        assert np.array_equal(
            segmentation(out / f"{case}.nii.gz"),
            segmentation(with_flag["out"] / f"{case}.nii.gz"),
        )


def test_missing_previous_stage_file_is_one_line_and_writes_nothing(
    tree: dict, with_flag: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    """(c)"""
    partial = tree["root"] / "low_partial"
    shutil.copytree(with_flag["low"], partial)
    (partial / f"{CASES[1]}.nii.gz").unlink()
    out = tree["root"] / "cascade_c"
    capsys.readouterr()
    assert predict(tree, out, CASCADE, "--prev-stage-predictions", str(partial)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"case {CASES[1]}" in err and str(partial) in err
    assert not out.exists()


def test_cascade_model_without_a_previous_stage_model_is_one_line(
    tree: dict, capsys: pytest.CaptureFixture
) -> None:
    lone = tree["root"] / "lone" / "nnUNetTrainer__nnUNetPlans__3d_cascade_fullres"
    shutil.copytree(tree["models"][CASCADE], lone)
    out = tree["root"] / "cascade_lone"
    args = ["predict-from-modelfolder", "-i", str(tree["images"]), "-o", str(out), "-m", str(lone)]
    capsys.readouterr()
    assert main([*args, *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "-prev_stage_predictions" in err and LOW in err
    assert not out.exists()


def test_previous_stage_segmentation_reaches_the_network(
    tree: dict, with_flag: dict[str, Path]
) -> None:
    """(d): another previous-stage file for a case changes its probabilities."""
    changed = tree["root"] / "low_changed"
    shutil.copytree(with_flag["low"], changed)
    path = changed / f"{CASES[0]}.nii.gz"
    image = sitk.ReadImage(str(path))
    flipped = sitk.GetImageFromArray((sitk.GetArrayFromImage(image) == 0).astype(np.uint8))
    flipped.CopyInformation(image)
    sitk.WriteImage(flipped, str(path))
    model = load_trained_model(tree["models"][CASCADE], [0])
    settings = PredictionSettings(
        use_mirroring=False,
        save_probabilities=True,
        num_processes_preprocessing=0,
        num_processes_export=0,
        progress=False,
    )
    cases = input_cases(tree["images"], model.dataset_json)[:1]
    out = tree["root"] / "cascade_d"
    predict_cases(model, with_previous_stage(cases, changed, ".nii.gz"), out, settings)
    a = np.load(with_flag["out"] / f"{CASES[0]}.npz")["probabilities"]
    d = np.load(out / f"{CASES[0]}.npz")["probabilities"]
    assert a.shape == d.shape and not np.allclose(a, d, atol=1e-4)


def test_stacked_input_is_the_image_plus_the_seg_preprocessed_previous_stage(
    tree: dict, with_flag: dict[str, Path]
) -> None:
    """The network input: the image, then the previous stage's file cropped with the image's
    bbox and resampled with the seg resampling to the cascade's spacing, one-hot."""
    model = load_trained_model(tree["models"][CASCADE], [0])
    plans, dataset_json = model.plans, model.dataset_json
    case = input_cases(tree["images"], dataset_json)[0]
    previous = with_flag["low"] / f"{case.identifier}.nii.gz"
    with_seg = RawCase(case.identifier, case.images, previous)
    stacked, properties = preprocess_case(with_seg, plans, CASCADE, dataset_json)
    # the training seg path: the previous stage's file as the case's label (upstream passes it
    # as run_case's seg; with use_mask_for_norm its foreground also widens the norm mask)
    data, seg, _ = run_case(with_seg, plans, CASCADE, dataset_json)
    assert np.array_equal(stacked, cascade_input(data, seg, dataset_json.label_spec))
    assert "class_locations" not in properties
    # the same seg, step by step: cropped with the image (its bbox; 0 outside the image's nonzero
    # mask becomes -1, which decides ties of the seg resampling), then the seg resampling
    assert plans.transpose_forward == (0, 1, 2)
    raw = sitk.GetArrayFromImage(sitk.ReadImage(str(previous)))[None].astype(np.int16)
    image = sitk.GetArrayFromImage(sitk.ReadImage(str(case.images[0])))[None]
    _, cropped, bbox = crop_to_nonzero(image.astype(np.float32), raw)
    assert bbox == properties["bbox_used_for_cropping"]
    configuration = plans.configuration(CASCADE)
    spacing, target = properties["spacing"], list(configuration.spacing)
    shape = compute_new_shape(cropped.shape[1:], spacing, target)
    kwargs = resampling_kwargs(configuration, "seg", CASCADE)
    expected = resample(
        cropped, plan_resampling(shape, spacing, target), True, kwargs["order"], kwargs["order_z"]
    )
    labels = dataset_json.label_spec.foreground_labels
    channels = len(dataset_json.channel_names)
    assert stacked.shape == (channels + len(labels), *shape)
    one_hot = one_hot_foreground(expected[0], labels, stacked.dtype)
    assert one_hot.any() and np.array_equal(stacked[channels:], one_hot)
