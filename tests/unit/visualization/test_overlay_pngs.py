"""``nnunet-core plot-overlay-pngs`` (upstream's ``nnUNetv2_plot_overlay_pngs``), in-process on a
tiny synthetic raw dataset and a hand-written preprocessed folder; and against upstream's own
slice choice and pixels where the peer venv is installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
from matplotlib.image import imread

from nnunet_core.cli import main
from nnunet_core.dataset.synthesize import SynthOptions, synthesize_dataset
from nnunet_core.io.blosc2_store import save_case
from nnunet_core.visualization.overlay import overlay_rgb, select_slice

DATASET = "Dataset906_Overlay"
PEER_PYTHON = Path.home() / ".cache" / "nnunet-peer" / "venv" / "bin" / "python"


@pytest.fixture(autouse=True)
def no_root_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the roots a test passes as flags exist for it."""
    for name in ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def raw_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw")
    synthesize_dataset(root / DATASET, SynthOptions(num_training=3, num_test=1, shape=(8, 16, 16)))
    return root


def png_rgb(path: Path) -> np.ndarray:
    """A PNG's RGB as uint8 (matplotlib reads 8-bit PNGs as floats k / 255)."""
    return np.round(imread(path)[..., :3] * 255).astype(np.uint8)


def plot(*flags: str) -> int:
    return main(["plot-overlay-pngs", "-np", "1", *flags])


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nnunet-core plot-overlay-pngs: error: "), err
    return err


def test_raw_one_png_per_training_case_showing_upstreams_slice(raw_root: Path, tmp_path) -> None:
    out = tmp_path / "out"
    assert plot("-d", "906", "-o", str(out), "--use_raw", "--raw", str(raw_root)) == 0
    cases = sorted(
        p.name[: -len("_0000.nii.gz")] for p in (raw_root / DATASET / "imagesTr").iterdir()
    )
    assert len(cases) == 3
    assert sorted(p.name for p in out.iterdir()) == [f"{case}.png" for case in cases]
    for case in cases:
        image = sitk.GetArrayFromImage(
            sitk.ReadImage(str(raw_root / DATASET / "imagesTr" / f"{case}_0000.nii.gz"))
        )
        seg = sitk.GetArrayFromImage(
            sitk.ReadImage(str(raw_root / DATASET / "labelsTr" / f"{case}.nii.gz"))
        )
        index = select_slice(seg)
        assert (seg[index] > 0).any(), case
        assert (png_rgb(out / f"{case}.png") == overlay_rgb(image[index], seg[index])).all(), case


def test_raw_overlay_intensity_reaches_the_pixels(raw_root: Path, tmp_path) -> None:
    weak, strong = tmp_path / "weak", tmp_path / "strong"
    common = ["-d", DATASET, "--use_raw", "--raw", str(raw_root)]
    assert plot(*common, "-o", str(weak), "-overlay_intensity", "0") == 0
    assert plot(*common, "-o", str(strong), "--overlay-intensity", "2") == 0
    grey = png_rgb(next(weak.iterdir()))
    assert (grey[..., 0] == grey[..., 2]).all()
    coloured = png_rgb(strong / next(weak.iterdir()).name)
    assert (coloured[..., 0] != coloured[..., 2]).any()


def _preprocessed(root: Path) -> Path:
    """Plans with 3d_fullres and 2d (different data folders) and one two-channel case each."""
    folder = root / DATASET
    configurations = {
        "2d": {"data_identifier": "nnUNetPlans_2d", "patch_size": [4, 4]},
        "3d_fullres": {"data_identifier": "nnUNetPlans_3d_fullres", "patch_size": [4, 4, 4]},
    }
    plans = {"dataset_name": DATASET, "plans_name": "nnUNetPlans", "configurations": configurations}
    folder.mkdir(parents=True)
    (folder / "nnUNetPlans.json").write_text(json.dumps(plans))
    data = np.zeros((2, 3, 4, 4), dtype=np.float32)
    data[0] = np.arange(48).reshape(3, 4, 4)
    data[1] = -data[0]
    seg = np.full((1, 3, 4, 4), -1, dtype=np.int16)
    seg[0, 1, :2, :2] = 0
    seg[0, 1, 2:, 2:] = 1  # slice 1 holds the only foreground
    for identifier, case in (("nnUNetPlans_3d_fullres", "case_3d"), ("nnUNetPlans_2d", "case_2d")):
        save_case(folder / identifier, case, data, seg, {}, (4, 4, 4))
    return root


def test_preprocessed_default_configuration_channel_and_outside_label(tmp_path) -> None:
    pre, out = _preprocessed(tmp_path / "pre"), tmp_path / "out"
    assert plot("-d", DATASET, "-o", str(out), "--preprocessed", str(pre), "-channel_idx", "1") == 0
    assert [p.name for p in out.iterdir()] == ["case_3d.png"]  # 3d_fullres, as upstream
    channel_1 = -np.arange(48, dtype=np.float32).reshape(3, 4, 4)[1]
    labels = np.zeros((4, 4), dtype=np.int16)
    labels[2:, 2:] = 1  # -1 drawn as background
    assert (png_rgb(out / "case_3d.png") == overlay_rgb(channel_1, labels)).all()
    assert plot("-d", DATASET, "-o", str(out), "--preprocessed", str(pre), "-c", "2d") == 0
    assert sorted(p.name for p in out.iterdir()) == ["case_2d.png", "case_3d.png"]


def test_preprocessed_refusals_are_one_line(tmp_path, capsys) -> None:
    pre, out = _preprocessed(tmp_path / "pre"), tmp_path / "out"
    common = ["-d", DATASET, "-o", str(out), "--preprocessed", str(pre)]
    assert plot(*common, "-channel_idx", "2") == 2
    assert "-channel_idx 2: nnUNetPlans_3d_fullres (case case_3d) has channels 0 to 1" in (
        one_line_error(capsys)
    )
    assert plot(*common, "-c", "3d_lowres") == 2
    assert "no configuration '3d_lowres'" in one_line_error(capsys)
    assert plot(*common, "-p", "OtherPlans") == 2
    assert "OtherPlans.json: plans file not found" in one_line_error(capsys)
    assert not out.exists()


def test_a_bad_dataset_id_is_one_line_and_exit_2(raw_root: Path, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert plot("-d", "907", "-o", str(out), "--use_raw", "--raw", str(raw_root)) == 2
    assert f"no dataset with id 907 in {raw_root}" in one_line_error(capsys)
    assert plot("-d", "906", "-o", str(out), "--preprocessed", str(tmp_path / "none")) == 2
    assert "no such folder" in one_line_error(capsys)
    assert not out.exists()


def test_a_negative_overlay_intensity_is_refused(raw_root: Path, tmp_path, capsys) -> None:
    flags = ["-d", "906", "-o", str(tmp_path / "o"), "--use_raw", "--raw", str(raw_root)]
    assert plot(*flags, "-overlay_intensity", "-0.5") == 2
    assert "-overlay_intensity must be >= 0, got -0.5" in one_line_error(capsys)


# Upstream's overlay module imports its dataset classes and plans handler, which import torch
# (4 s); the functions compared need neither, so the peer script stubs those two modules.
PEER_SCRIPT = """
import json, sys, types
for name, attrs in {
    "nnunetv2.training.dataloading.nnunet_dataset": ("infer_dataset_class", "nnUNetBaseDataset"),
    "nnunetv2.utilities.plans_handling.plans_handler": ("ConfigurationManager",),
}.items():
    module = types.ModuleType(name)
    for attr in attrs:
        setattr(module, attr, object)
    sys.modules[name] = module
import numpy as np
from nnunetv2.imageio.simpleitk_reader_writer import SimpleITKIO
from nnunetv2.utilities.overlay_plots import plot_overlay, select_slice_to_plot2
jobs = json.loads(sys.argv[1])
for image, label, output in jobs["cases"]:
    plot_overlay(image, label, SimpleITKIO(), output, overlay_intensity=jobs["intensity"])
arrays = np.load(jobs["volumes"])
print(json.dumps([select_slice_to_plot2(arrays[k], arrays[k]) for k in sorted(arrays.files)]))
"""


def hand_made_volumes() -> dict[str, np.ndarray]:
    """Segmentations where the voxel count, the per-class share and upstream's rule disagree."""
    rng = np.random.default_rng(3)
    volumes = {f"random_{i}": rng.choice(4, (6, 5, 5), p=[0.7, 0.2, 0.07, 0.03]) for i in range(6)}
    lesion = np.zeros((2, 4, 4), dtype=np.int16)
    lesion[0, 0, :2], lesion[1, :2, :] = (1, 2), 1
    volumes["single_voxel_lesion"] = lesion
    volumes["empty"] = np.zeros((3, 4, 4), dtype=np.int16)
    return volumes


@pytest.mark.skipif(not PEER_PYTHON.is_file(), reason="no upstream peer venv")
def test_slice_and_pixels_match_upstream(raw_root: Path, tmp_path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    theirs.mkdir()
    intensity = 0.45
    flags = ["-d", "906", "-o", str(ours), "--use_raw", "--raw", str(raw_root)]
    assert plot(*flags, "-overlay_intensity", str(intensity)) == 0
    images = sorted((raw_root / DATASET / "imagesTr").iterdir())
    cases = [p.name[: -len("_0000.nii.gz")] for p in images]
    volumes = hand_made_volumes()
    np.savez(tmp_path / "volumes.npz", **volumes)
    jobs = {
        "cases": [
            [
                str(image),
                str(raw_root / DATASET / "labelsTr" / f"{case}.nii.gz"),
                str(theirs / f"{case}.png"),
            ]
            for image, case in zip(images, cases, strict=True)
        ],  # fmt: skip
        "intensity": intensity,
        "volumes": str(tmp_path / "volumes.npz"),
    }
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["MPLBACKEND"] = "Agg"
    result = subprocess.run(
        [str(PEER_PYTHON), "-c", PEER_SCRIPT, json.dumps(jobs)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    upstream_slices = json.loads(result.stdout.strip().splitlines()[-1])
    assert upstream_slices == [select_slice(volumes[k]) for k in sorted(volumes)]
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for case in cases:
        assert (imread(ours / f"{case}.png") == imread(theirs / f"{case}.png")).all(), case


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
