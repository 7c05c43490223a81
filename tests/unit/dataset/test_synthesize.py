"""``nnunet-core synthesize``: seeded, realistic enough for fingerprint/planning, verify-clean."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from nnunet_core.cli import main
from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset

TINY = SynthOptions(num_training=3, num_test=1, shape=(8, 16, 16))


def arrays(folder: Path) -> dict[str, np.ndarray]:
    return {
        p.relative_to(folder).as_posix(): sitk.GetArrayFromImage(sitk.ReadImage(str(p)))
        for p in sorted(folder.rglob("*.nii.gz"))
    }


def read(path: Path) -> tuple[np.ndarray, sitk.Image]:
    image = sitk.ReadImage(str(path))
    return sitk.GetArrayFromImage(image), image


@pytest.fixture(scope="module")
def ten_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "Dataset902_Ten"
    synthesize_dataset(folder, SynthOptions(num_training=10, num_test=2, shape=(16, 32, 32)))
    return folder


def test_same_seed_same_arrays_other_seed_differs(tmp_path: Path) -> None:
    folders = [tmp_path / run / "Dataset904_Same" for run in ("a", "b", "c")]
    synthesize_dataset(folders[0], TINY)
    synthesize_dataset(folders[1], TINY)
    synthesize_dataset(
        folders[2], SynthOptions(num_training=3, num_test=1, shape=(8, 16, 16), seed=1)
    )
    a, b, c = (arrays(folder) for folder in folders)
    assert a.keys() == b.keys() == c.keys() and len(a) == 8
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].tobytes() == b[key].tobytes(), key
    assert any(a[k].shape != c[k].shape or a[k].tobytes() != c[k].tobytes() for k in a)
    assert (folders[0] / "dataset.json").read_bytes() == (folders[1] / "dataset.json").read_bytes()


def test_dataset_json(ten_cases: Path) -> None:
    content = json.loads((ten_cases / "dataset.json").read_text())
    assert content["channel_names"] == {"0": "MR"}
    assert content["labels"] == {"background": 0, "organ": 1, "lesion": 2}
    assert content["numTraining"] == 10 and content["file_ending"] == ".nii.gz"
    assert content["name"] == "Ten" and content["description"]


def test_geometry_varies_and_is_anisotropic(ten_cases: Path) -> None:
    shapes, spacings = set(), []
    for path in sorted((ten_cases / "imagesTr").iterdir()):
        array, image = read(path)
        assert array.dtype == np.float32
        shapes.add(array.shape)
        spacings.append(image.GetSpacing()[::-1])
        assert image.GetDirection() == (-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0)
        assert image.GetOrigin() != (0.0, 0.0, 0.0)
    assert len(shapes) > 3
    spacing = np.asarray(spacings)
    assert np.allclose(np.median(spacing, axis=0), (2.5, 0.8, 0.8), rtol=0.1)
    assert spacing[:, 0].min() > 2 * spacing[:, 1:].max()
    assert len({tuple(s) for s in spacing}) > 3


def test_background_zeros_around_the_body_and_labels_inside(ten_cases: Path) -> None:
    for path in sorted((ten_cases / "imagesTr").iterdir()):
        image, _ = read(path)
        label, _ = read(ten_cases / "labelsTr" / path.name.replace("_0000", ""))
        assert label.shape == image.shape
        nonzero = np.argwhere(image != 0)
        low, high = nonzero.min(axis=0), nonzero.max(axis=0)
        assert (low > 0).all() and (high < np.asarray(image.shape) - 1).all(), path.name
        assert np.all(image[label > 0] != 0)
        assert np.isfinite(image).all() and image.min() == 0


def test_both_classes_in_most_cases_and_distinguishable(ten_cases: Path) -> None:
    with_both, means = 0, {1: [], 2: [], 0: []}
    for path in sorted((ten_cases / "labelsTr").iterdir()):
        label, _ = read(path)
        image, _ = read(ten_cases / "imagesTr" / path.name.replace(".nii.gz", "_0000.nii.gz"))
        with_both += {1, 2} <= set(np.unique(label).tolist())
        body = (image != 0) & (label == 0)
        for value, mask in ((0, body), (1, label == 1), (2, label == 2)):
            if mask.any():
                means[value].append(float(image[mask].mean()))
    assert with_both >= 8
    body, organ, lesion = (np.mean(means[v]) for v in (0, 1, 2))
    assert organ > body + 20 and lesion < organ - 20


def test_test_cases_have_held_out_labels(ten_cases: Path) -> None:
    images = sorted(p.name for p in (ten_cases / "imagesTs").iterdir())
    labels = sorted(p.name for p in (ten_cases / "labelsTs").iterdir())
    assert images == ["synth_t000_0000.nii.gz", "synth_t001_0000.nii.gz"]
    assert labels == ["synth_t000.nii.gz", "synth_t001.nii.gz"]


def test_multichannel(tmp_path: Path) -> None:
    options = SynthOptions(num_training=2, num_test=1, shape=(8, 16, 16), channels=3)
    synthesize_dataset(tmp_path / "d", options)
    content = json.loads((tmp_path / "d" / "dataset.json").read_text())
    assert content["channel_names"] == {"0": "MR", "1": "T2", "2": "FLAIR"}
    names = sorted(p.name for p in (tmp_path / "d" / "imagesTr").iterdir())
    assert names == [f"synth_00{i}_000{c}.nii.gz" for i in range(2) for c in range(3)]
    channels = [read(tmp_path / "d" / "imagesTr" / f"synth_000_000{c}.nii.gz")[0] for c in range(3)]
    assert not np.array_equal(channels[0], channels[1])
    assert np.array_equal(channels[0] != 0, channels[2] != 0)


def test_cli_2d_and_verify_passes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "raw" / "Dataset903_Flat"
    flags = ["--num-training", "3", "--num-test", "1", "--shape", "8", "32", "32", "--2d"]
    assert main(["synthesize", "--output", str(out), *flags]) == 0
    array, image = read(out / "imagesTr" / "synth_000_0000.nii.gz")
    assert image.GetDimension() == 2 and array.ndim == 2
    assert image.GetSpacing() != (1.0, 1.0)
    assert read(out / "labelsTr" / "synth_000.nii.gz")[1].GetDimension() == 2
    verify = [
        "verify",
        "-d",
        "903",
        "--raw",
        str(tmp_path / "raw"),
        "--preprocessed",
        str(tmp_path / "pre"),
        "-np",
        "1",
    ]
    assert main(verify) == 0, capsys.readouterr().err
    assert (
        json.loads((tmp_path / "pre" / "Dataset903_Flat" / "verify.json").read_text())[
            "dimensionality"
        ]
        == 2
    )


def test_png_2d(tmp_path: Path) -> None:
    synthesize_dataset(
        tmp_path / "p", SynthOptions(num_training=2, num_test=0, shape=(24, 24), file_ending=".png")
    )
    array, image = read(tmp_path / "p" / "imagesTr" / "synth_000_0000.png")
    assert array.dtype == np.uint8 and array.ndim == 2 and array.max() > 0


def test_default_cli_writes_dataset_that_verifies(tmp_path: Path) -> None:
    out = tmp_path / "raw" / "Dataset900_Synth"
    subprocess.run(
        [sys.executable, "-m", "nnunet_core", "synthesize", "--output", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (
        len(list((out / "imagesTr").iterdir())) == 20
        and len(list((out / "imagesTs").iterdir())) == 5
    )
    assert read(out / "imagesTr" / "synth_000_0000.nii.gz")[0].shape[0] in range(28, 37)
    verify = [
        sys.executable,
        "-m",
        "nnunet_core",
        "verify",
        "-d",
        "900",
        "--raw",
        str(tmp_path / "raw"),
        "--output",
        str(tmp_path / "v.json"),
    ]
    done = subprocess.run(verify, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "v.json").read_text())["cases_checked"] == 20


def test_refuses_non_empty_output_unless_forced(tmp_path: Path, capsys) -> None:
    out = tmp_path / "d"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    flags = [
        "synthesize",
        "--output",
        str(out),
        "--num-training",
        "2",
        "--num-test",
        "0",
        "--shape",
        "8",
        "16",
        "16",
    ]
    assert main(flags) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--force" in err[0] and (out / "keep.txt").exists()
    assert main([*flags, "--force"]) == 0
    assert not (out / "keep.txt").exists() and (out / "dataset.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["d"]  # no temporary folders left behind


def test_invalid_options_are_one_line_errors(tmp_path: Path, capsys) -> None:
    assert (
        main(["synthesize", "--output", str(tmp_path / "x"), "--shape", "8", "16"]) == 0
    )  # 2 values: 2-D
    assert main(["synthesize", "--output", str(tmp_path / "y"), "--shape", "2", "16", "16"]) == 2
    assert "--shape values must be at least 4" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()


def label_counts(folder: Path) -> dict[str, list[int]]:
    return {
        key: np.bincount(array.ravel(), minlength=3).tolist()
        for key, array in arrays(folder).items()
        if key.startswith("labelsTr/")
    }


LESION_CASES = SynthOptions(num_training=4, num_test=0, shape=(16, 32, 32))
# (background, organ, lesion) voxels of LESION_CASES as written before --lesion-scale existed:
# the tests' and benchmarks' data must not change under the default scale.
COUNTS_BEFORE_LESION_SCALE = {
    "labelsTr/synth_000.nii.gz": [18535, 433, 40],
    "labelsTr/synth_001.nii.gz": [15719, 409, 0],
    "labelsTr/synth_002.nii.gz": [14638, 652, 55],
    "labelsTr/synth_003.nii.gz": [20055, 628, 125],
}


def test_lesion_scale_one_is_todays_data_and_larger_grows_only_the_lesion(tmp_path: Path) -> None:
    """The demo's larger lesion (learned in a few iterations) is an option: at 1.0 every array of
    every other dataset stays byte-identical; above it the lesion grows and nothing else moves."""
    folders = {scale: tmp_path / str(scale) / "Dataset905_Lesion" for scale in ("no", 1.0, 1.6)}
    synthesize_dataset(folders["no"], LESION_CASES)
    for scale in (1.0, 1.6):
        synthesize_dataset(folders[scale], replace(LESION_CASES, lesion_scale=scale))
    default, one, larger = (arrays(folder) for folder in folders.values())
    assert default.keys() == one.keys() == larger.keys() and len(default) == 8
    for key in default:
        assert default[key].tobytes() == one[key].tobytes(), key
    assert label_counts(folders["no"]) == COUNTS_BEFORE_LESION_SCALE
    grown = label_counts(folders[1.6])
    for key, (_, _, lesion) in COUNTS_BEFORE_LESION_SCALE.items():
        assert (grown[key][2] == 0) == (lesion == 0), key  # a lesion where there was one
        assert grown[key][2] >= 2 * lesion, (key, grown[key], lesion)
        new, old = larger[key], default[key]
        assert not np.any((new == 1) & (old != 1)), key  # the same organ, less what the lesion took
        assert not np.any((old == 2) & (new != 2)), key  # the old lesion lies inside the new one
    for key in (k for k in default if k.startswith("imagesTr/")):
        assert np.array_equal(larger[key] == 0, default[key] == 0), key  # the same body


def test_lesion_scale_must_be_positive(tmp_path: Path, capsys) -> None:
    output = tmp_path / "Dataset906_Bad"
    assert main(["synthesize", "--output", str(output), "--lesion-scale", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("--lesion-scale must be positive, got 0.0")
    assert not output.exists()
