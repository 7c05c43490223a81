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
from nnunet_core.dataset.synthesize import TEST, TRAIN
from nnunet_core.errors import ConfigurationError
from nnunet_core.planning.fingerprint import extract_fingerprint
from nnunet_core.planning.planner import plan_experiment

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
    # a case does not depend on how many others are made, nor on the slice count's neighbours
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


def test_mr_case_is_a_brain_with_ventricles_and_lesion() -> None:
    volume, spacing = case_volume("mr", 0, TRAIN, 0)
    image, label = volume.image, volume.label
    assert image.shape == (256, 256, 256) and spacing == (1.0, 1.0, 1.0)
    assert image.dtype == np.int16
    assert set(np.unique(label).tolist()) == {0, ORGAN, LESION}
    brain = image > 0
    assert 0.9e6 < brain.sum() < 2.0e6  # 0.9-2 litres at 1 mm
    assert not brain[0].any() and not brain[:, 0].any() and not brain[:, :, -1].any()
    assert np.all(image[label > 0] > 0)
    csf, lesion = image[label == ORGAN].mean(), image[label == LESION].mean()
    white = np.median(image[brain & (label == 0)])
    assert csf < lesion - 150 and lesion < white - 150, (csf, lesion, white)


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


def test_ct_is_planned_with_lowres_and_cascade(tmp_path: Path) -> None:
    """Short cases still plan the cascade: 512 x 512 in-plane is what makes it."""
    raw = synthesize_realscale(tmp_path / "Dataset954_CTPlan", "ct", 3, 0, slices=48)
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
