"""``nnunet-core synthesize --preset ct|mr``: real-size data, seeded, sane, and planned as a CT.

The CT checks run on cases with few slices (the in-plane size, spacing and intensities are the
real ones); one full-length CT case checks the default slice count. Upstream's plans of the same
data: ``tests/parity/test_realscale_plans_parity.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main
from nnunet_core.dataset.realscale import case_volume, synthesize_realscale
from nnunet_core.dataset.realscale_volumes import Volume
from nnunet_core.dataset.synthesize import TEST, TRAIN
from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.fingerprint import extract_fingerprint
from nnunet_core.planning.planner import plan_experiment
from nnunet_core.preprocessing.cropping import bbox_of, nonzero_mask

ORGAN, LESION = 1, 2


def arrays(folder: Path) -> dict[str, np.ndarray]:
    return {
        p.relative_to(folder).as_posix(): sitk.GetArrayFromImage(sitk.ReadImage(str(p)))
        for p in sorted(folder.rglob("*.nii.gz"))
    }


def box_of(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    where = np.argwhere(mask)
    return where.min(axis=0), where.max(axis=0)


def test_same_seed_same_files_other_seed_differs(tmp_path: Path) -> None:
    folders = [tmp_path / run / "Dataset950_CT" for run in ("a", "b", "c")]
    for folder, seed in zip(folders, (0, 0, 1), strict=True):
        assert synthesize_realscale(folder, "ct", 1, 1, seed=seed, slices=8) == folder
    a, b, c = (arrays(folder) for folder in folders)
    assert len(a) == 4 and a.keys() == b.keys() == c.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key
    assert all(a[k].tobytes() != c[k].tobytes() for k in a if "imagesT" in k)
    assert (folders[0] / "dataset.json").read_bytes() == (folders[1] / "dataset.json").read_bytes()
    # the files hold exactly the arrays the API makes for that case
    again, _ = case_volume("ct", 0, TEST, 0, slices=8)
    assert again.image.tobytes() == a["imagesTs/ct_t000_0000.nii.gz"].tobytes()


def test_ct_case_has_hounsfield_tissues_and_organ_with_lesion() -> None:
    volume, spacing = case_volume("ct", 0, TRAIN, 0)  # full length: 80-120 slices
    image, label = volume.image, volume.label
    assert image.dtype == np.int16 and label.dtype == np.uint8
    assert 80 <= image.shape[0] <= 120 and image.shape[1:] == (512, 512)
    assert spacing[0] == 2.5 and 0.68 <= spacing[1] == spacing[2] <= 0.78
    assert set(np.unique(label).tolist()) == {0, ORGAN, LESION}
    assert abs(np.median(image[:, :20, :20]) + 1000) < 15  # air in the corners
    assert image.min() >= -1024 and image.max() <= 3071
    background = image[label == 0]
    fat = np.mean((background > -160) & (background < -40))
    soft = np.mean((background > 0) & (background < 80))
    assert fat > 0.02 and soft > 0.2, (fat, soft)
    assert np.sum(background > 600) > 10_000  # the spine
    organ, lesion = image[label == ORGAN].mean(), image[label == LESION].mean()
    assert 50 < organ < 70 and 15 < lesion < 35 and organ - lesion > 20, (organ, lesion)
    low, high = box_of(label == LESION)
    organ_low, organ_high = box_of(label > 0)
    assert (organ_low <= low).all() and (high <= organ_high).all()
    assert 0.001 < np.mean(label > 0) < 0.2


def test_ct_geometry_varies_per_case_and_slices_fixes_the_count() -> None:
    spacings = {case_volume("ct", 0, TRAIN, i, slices=8)[1] for i in range(4)}
    assert len(spacings) == 4
    shapes = {case_volume("ct", 3, TRAIN, i, slices=10)[0].image.shape for i in range(3)}
    assert shapes == {(10, 512, 512)}


@pytest.fixture(scope="module")
def mr_case() -> tuple[Volume, tuple[float, float, float]]:
    return case_volume("mr", 0, TRAIN, 0)


def test_mr_case_is_a_head_with_ventricles_and_lesion(mr_case) -> None:
    (image, label), spacing = (mr_case[0].image, mr_case[0].label), mr_case[1]
    assert image.shape == (256, 256, 256) and spacing == (1.0, 1.0, 1.0)
    assert image.dtype == np.int16 and image.min() >= 0
    assert set(np.unique(label).tolist()) == {0, ORGAN, LESION}
    assert 3 < image[-20:, :20, :20].mean() < 60  # magnitude noise around the head
    tissue = image[label == 0]
    white, grey = np.mean(np.abs(tissue - 850) < 80), np.mean(np.abs(tissue - 600) < 60)
    assert white > 0.03 and grey > 0.01, (white, grey)
    csf, lesion = image[label == ORGAN].mean(), image[label == LESION].mean()
    assert 100 < csf < 200 and 380 < lesion < 520, (csf, lesion)
    assert 10_000 < np.sum(label == ORGAN) < 60_000  # 10-60 ml of ventricles
    assert 1_000 < np.sum(label == LESION) < 25_000


def test_mr_is_planned_with_128_cubed_patches_and_lowres(mr_case) -> None:
    """The whole 256^3 survives cropping (a scanner's magnitude image has no zero background),
    which is what gives upstream's 128^3 patch, batch 2, and a 3d_lowres stage; the planner sees
    this case's cropped geometry (its intensity statistics do not change the configurations)."""
    (image, _), spacing = (mr_case[0].image, mr_case[0].label), mr_case[1]
    bbox = bbox_of(nonzero_mask(image[None]))
    assert bbox == [[0, 256], [0, 256], [0, 256]]
    shape = [high - low for low, high in bbox]
    stats = {"max": 900.0, "mean": 500.0, "median": 600.0, "min": 0.0, "std": 300.0}
    stats |= {"percentile_00_5": 0.0, "percentile_99_5": 890.0}
    fingerprint = {
        "spacings": [list(spacing)] * 4,
        "shapes_after_crop": [shape] * 4,
        "foreground_intensity_properties_per_channel": {"0": stats},
        "median_relative_size_after_cropping": 1.0,
    }
    dataset_json = {"channel_names": {"0": "T1"}, "labels": {"a": 0, "b": 1, "c": 2}}
    plans = plan_experiment(fingerprint, {**dataset_json, "numTraining": 4}, "Dataset960_MR")
    configurations = plans["configurations"]
    assert list(configurations) == ["2d", "3d_lowres", "3d_fullres", "3d_cascade_fullres"]
    fullres = configurations["3d_fullres"]
    assert (fullres["patch_size"], fullres["batch_size"]) == ([128, 128, 128], 2)
    assert fullres["normalization_schemes"] == ["ZScoreNormalization"]


def test_cli_writes_a_ct_dataset_as_scanners_do(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw" / "Dataset951_CTLike"
    flags = ["--preset", "ct", "--slices", "8", "--num-training", "2", "--num-test", "1"]
    assert main(["synthesize", "--output", str(out), *flags, "--seed", "4"]) == 0
    assert "3 cases (2 training, 1 test), preset ct, seed 4" in capsys.readouterr().out
    content = json.loads((out / "dataset.json").read_text())
    assert content["channel_names"] == {"0": "CT"} and content["numTraining"] == 2
    assert content["labels"] == {"background": 0, "organ": 1, "lesion": 2}
    assert content["name"] == "CTLike"
    image = sitk.ReadImage(str(out / "imagesTr" / "ct_001_0000.nii.gz"))
    assert image.GetPixelID() == sitk.sitkInt16 and image.GetSize() == (512, 512, 8)
    assert image.GetSpacing()[2] == 2.5
    test_image = sitk.ReadImage(str(out / "imagesTs" / "ct_t000_0000.nii.gz"))
    label = sitk.ReadImage(str(out / "labelsTs" / "ct_t000.nii.gz"))
    assert label.GetPixelID() == sitk.sitkUInt8
    for read in ("GetSize", "GetSpacing", "GetOrigin", "GetDirection"):
        assert getattr(label, read)() == getattr(test_image, read)(), read
    assert test_image.GetSpacing() != image.GetSpacing()  # pixel sizes vary per case
    roots = ["--raw", str(tmp_path / "raw"), "--preprocessed", str(tmp_path / "pre")]
    assert main(["verify", "-d", "951", "-np", "1", *roots]) == 0
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no leftovers


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--preset", "pet"], "argument --preset: invalid choice: 'pet'"),
        (["--preset", "ct", "--shape", "8", "8", "8"], "sets the image geometry itself; drop"),
        (["--preset", "mr", "--slices", "40"], "preset 'mr' is always 256^3"),
        (["--preset", "ct", "--slices", "3"], "--slices must be at least 8, got 3"),
        (["--slices", "40"], "--slices needs --preset ct"),
        (["--preset", "ct", "--num-training", "0"], "--num-training must be >= 1"),
    ],
)
def test_bad_preset_arguments_one_line_nothing_written(
    tmp_path: Path, capsys, flags: list[str], message: str
) -> None:
    out = tmp_path / "raw" / "Dataset952_Bad"
    try:
        code = main(["synthesize", "--output", str(out), *flags])
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists() and not (out.parent.exists() and any(out.parent.iterdir()))


def test_unknown_preset_from_python_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown preset 'pet'; choose one of ct, mr"):
        synthesize_realscale(tmp_path / "Dataset953_X", "pet", 1, 0)


@pytest.mark.slow  # fingerprint: 1e7 intensity samples, 10-20 s on 2 cores
def test_ct_is_planned_with_lowres_and_cascade(tmp_path: Path) -> None:
    """Cases shorter than the preset's still plan the cascade (from 56 slices on: the 512 x 512
    in-plane size is what makes it); two are enough for the planner's medians."""
    raw = synthesize_realscale(tmp_path / "Dataset954_CTPlan", "ct", 2, 0, slices=60)
    fingerprint = extract_fingerprint(raw, num_processes=1)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    plans = plan_experiment(fingerprint, dataset_json, raw.name)
    configurations = plans["configurations"]
    assert list(configurations) == ["2d", "3d_lowres", "3d_fullres", "3d_cascade_fullres"]
    assert configurations["3d_lowres"]["next_stage"] == "3d_cascade_fullres"
    assert configurations["3d_fullres"]["normalization_schemes"] == ["CTNormalization"]
    lowres, fullres = (
        configurations["3d_lowres"]["spacing"],
        configurations["3d_fullres"]["spacing"],
    )
    assert all(a >= b for a, b in zip(lowres, fullres, strict=True)) and lowres != fullres
