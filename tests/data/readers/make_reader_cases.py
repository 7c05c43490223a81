"""Write the reader parity datasets and store what upstream nnU-Net 2.8.1 makes of them.

Run in the peer venv (``source ../shared/peer/env.sh``), from the repository root; see README.md
in this folder. Not a test and not needed at test time: it writes the raw datasets into
``$nnUNet_raw``, runs upstream's fingerprint, planner and preprocessing on them, and copies the
inputs and upstream's outputs (preprocessed arrays as ``.npz``, properties as JSON) to
``tests/data/readers/<scenario>/``. One case per scenario is also written back by upstream's own
reader from its ``read_seg`` array and ``read_images`` properties (``written/``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
from pathlib import Path
from typing import Any

import blosc2
import nibabel
import numpy as np
import SimpleITK as sitk
import tifffile
from skimage import io as skio

HERE = Path(__file__).resolve().parent
LABELS = {"background": 0, "organ": 1, "lesion": 2}


def _rotation(axis: int, degrees: float) -> np.ndarray:
    a = np.deg2rad(degrees)
    c, s = np.cos(a), np.sin(a)
    i, j = [k for k in range(3) if k != axis]
    r = np.eye(3)
    r[i, i], r[i, j], r[j, i], r[j, j] = c, -s, s, c
    return r


def _volume(rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Image (zero border on two faces, so cropping matters) and a 0/1/2 label of one shape."""
    grid = np.stack(np.meshgrid(*[np.linspace(-1, 1, s) for s in shape], indexing="ij"))
    centre = rng.uniform(-0.25, 0.25, size=len(shape)).reshape(-1, *[1] * len(shape))
    radius = np.sqrt(
        (
            (grid - centre) ** 2
            / np.array([0.5, 0.4, 0.6][: len(shape)]).reshape(-1, *[1] * len(shape)) ** 2
        ).sum(0)
    )
    seg = np.zeros(shape, np.uint8)
    seg[radius < 1.0] = 1
    seg[radius < 0.45] = 2
    image = (rng.normal(100, 20, size=shape) + 80 * (seg == 1) + 160 * (seg == 2)).astype(
        np.float32
    )
    image[:2] = 0
    image[(slice(None), slice(0, 1))] = 0
    return image, seg


def _dataset_json(
    name: str, channels: dict[str, str], ending: str, n: int, reader: str | None
) -> dict[str, Any]:
    content: dict[str, Any] = {
        "channel_names": channels,
        "labels": LABELS if ending != ".png" else {"background": 0, "road": 1},
        "numTraining": n,
        "file_ending": ending,
        "name": name,
    }
    if reader is not None:
        content["overwrite_image_reader_writer"] = reader
    return content


def write_nibabel(raw: Path, reorient: bool) -> None:
    """Anisotropic, oblique, flipped affines; with ``reorient`` also permuted voxel axes."""
    for i in range(4):
        rng = np.random.default_rng(10 + i)
        if reorient:
            # voxel axes ~ (S, L, P): permuted and flipped against RAS, slightly oblique
            base = np.array([[0, -1, 0], [0, 0, -1], [1, 0, 0]], float)
            zooms = np.array([2.6, 0.85, 1.15])
            shape = (16 + i, 24, 20 - i)
        else:
            base = np.diag([-1.0, 1.0, 1.0])
            zooms = np.array([0.9, 1.3, 2.7])
            shape = (24 - i, 20, 16 + i)
        rotation = _rotation(2, 12 + 3 * i) @ _rotation(0, 7) @ base
        affine = np.eye(4)
        affine[:3, :3] = rotation * (zooms * [1.0, 1.0 + 0.04 * i, 1.0 - 0.05 * i])
        affine[:3, 3] = [-40.0 + i, 25.5, 60.25 - 2 * i]
        image, seg = _volume(rng, shape)
        nibabel.save(
            nibabel.Nifti1Image(image, affine), raw / "imagesTr" / f"nib_{i:03d}_0000.nii.gz"
        )
        nibabel.save(nibabel.Nifti1Image(seg, affine), raw / "labelsTr" / f"nib_{i:03d}.nii.gz")


def write_sitk_reorient(raw: Path) -> None:
    """SimpleITK images whose direction is a flipped permutation of RAS (LPS world)."""
    for i in range(4):
        rng = np.random.default_rng(30 + i)
        image, seg = _volume(rng, (20 + i, 16, 24 - i))  # numpy (z, y, x)
        direction = np.array([[0, 0, -1], [1, 0, 0], [0, -1, 0]], float).flatten().tolist()
        for array, path in (
            (image, f"imagesTr/sr_{i:03d}_0000.nii.gz"),
            (seg, f"labelsTr/sr_{i:03d}.nii.gz"),
        ):
            itk = sitk.GetImageFromArray(array)
            itk.SetSpacing((0.8, 1.2 + 0.1 * i, 2.5 - 0.2 * i))
            itk.SetOrigin((12.0, -30.5 + i, 7.25))
            itk.SetDirection(direction)
            sitk.WriteImage(itk, str(raw / path), True)


def write_natural(raw: Path) -> None:
    """RGB png images (one file, three channels) and 0/1 png labels."""
    for i in range(4):
        rng = np.random.default_rng(50 + i)
        shape = (40 + 2 * i, 48 - i)
        _, seg3 = _volume(rng, (3, *shape))
        seg = (seg3[1] > 0).astype(np.uint8)
        rgb = np.stack(
            [
                rng.integers(0, 120, shape) + 120 * seg,
                rng.integers(0, 255, shape),
                60 + 100 * seg + rng.integers(0, 40, shape),
            ],
            -1,
        )
        skio.imsave(
            raw / "imagesTr" / f"img_{i:03d}_0000.png", rgb.astype(np.uint8), check_contrast=False
        )
        skio.imsave(raw / "labelsTr" / f"img_{i:03d}.png", seg, check_contrast=False)


def write_tiff(raw: Path) -> None:
    """3-D tiffs with the spacing in a ``.json`` beside each case's images and label."""
    for i in range(3):
        rng = np.random.default_rng(70 + i)
        image, seg = _volume(rng, (16, 20 + i, 24))
        spacing = {"spacing": [3.0, 0.75 + 0.05 * i, 0.75]}
        tifffile.imwrite(raw / "imagesTr" / f"tf_{i:03d}_0000.tiff", image)
        tifffile.imwrite(raw / "labelsTr" / f"tf_{i:03d}.tiff", seg)
        for folder in ("imagesTr", "labelsTr"):
            (raw / folder / f"tf_{i:03d}.json").write_text(json.dumps(spacing))


# scenario -> (dataset folder, channels, file ending, dataset.json reader key, writer, configs)
SCENARIOS = {
    "nibabel": (
        "Dataset961_ReadNib",
        {"0": "MR"},
        ".nii.gz",
        "NibabelIO",
        lambda r: write_nibabel(r, False),
        ("2d", "3d_fullres"),
    ),
    "nibabel_reorient": (
        "Dataset962_ReadNibRe",
        {"0": "MR"},
        ".nii.gz",
        "NibabelIOWithReorient",
        lambda r: write_nibabel(r, True),
        ("2d", "3d_fullres"),
    ),
    "natural2d": (
        "Dataset963_ReadPng",
        {"0": "R", "1": "G", "2": "B"},
        ".png",
        None,
        write_natural,
        ("2d",),
    ),
    "tiff3d": ("Dataset964_ReadTiff", {"0": "CT"}, ".tiff", None, write_tiff, ("2d", "3d_fullres")),
    "sitk_reorient": (
        "Dataset965_ReadSitkRe",
        {"0": "MR"},
        ".nii.gz",
        "SimpleITKIOWithReorient",
        write_sitk_reorient,
        ("2d", "3d_fullres"),
    ),
}


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _run(*command: str) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def _write_back(raw: Path, ending: str, out: Path) -> None:
    """Upstream's reader writes the first case's label back from its own read_seg/read_images."""
    from nnunetv2.imageio.reader_writer_registry import (
        determine_reader_writer_from_dataset_json,
    )

    dataset_json = json.loads((raw / "dataset.json").read_text())
    label = sorted((raw / "labelsTr").glob(f"*{ending}"))[0]
    case = label.name[: -len(ending)]
    images = sorted(str(p) for p in (raw / "imagesTr").glob(f"{case}_*{ending}"))
    reader = determine_reader_writer_from_dataset_json(dataset_json, images[0])()
    seg, _ = reader.read_seg(str(label))
    _, properties = reader.read_images(images)
    out.mkdir(parents=True, exist_ok=True)
    reader.write_seg(seg[0], str(out / f"{case}{ending}"), properties)
    (out / f"{case}_properties.json").write_text(json.dumps(_jsonable(properties), indent=1))


def make(scenario: str, dataset_id_root: Path) -> None:
    folder, channels, ending, reader, writer, configs = SCENARIOS[scenario]
    raw = Path(os.environ["nnUNet_raw"]) / folder
    pre = Path(os.environ["nnUNet_preprocessed"]) / folder
    for path in (raw, pre):
        shutil.rmtree(path, ignore_errors=True)
    (raw / "imagesTr").mkdir(parents=True)
    (raw / "labelsTr").mkdir()
    writer(raw)
    n = len(list((raw / "labelsTr").glob(f"*{ending}")))
    (raw / "dataset.json").write_text(
        json.dumps(_dataset_json(folder.split("_", 1)[1], channels, ending, n, reader), indent=4)
    )
    dataset_id = folder[7:10]
    _run("nnUNetv2_extract_fingerprint", "-d", dataset_id, "-np", "1")
    _run("nnUNetv2_plan_experiment", "-d", dataset_id)
    _run("nnUNetv2_preprocess", "-d", dataset_id, "-c", *configs, "-np", *["1"] * len(configs))

    target = dataset_id_root / scenario
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(raw, target / "raw")
    for name in ("dataset_fingerprint.json", "nnUNetPlans.json"):
        shutil.copy(pre / name, target / name)
    plans = json.loads((pre / "nnUNetPlans.json").read_text())
    for config in configs:
        identifier = plans["configurations"][config]["data_identifier"]
        out = target / "preprocessed" / identifier
        out.mkdir(parents=True)
        for b2nd in sorted((pre / identifier).glob("*_seg.b2nd")):
            case = b2nd.name[: -len("_seg.b2nd")]
            data = blosc2.open(str(pre / identifier / f"{case}.b2nd"))[:]
            seg = blosc2.open(str(b2nd))[:]
            np.savez_compressed(out / f"{case}.npz", data=data, seg=seg)
            with open(pre / identifier / f"{case}.pkl", "rb") as handle:
                properties = pickle.load(handle)
            (out / f"{case}_properties.json").write_text(json.dumps(_jsonable(properties)))
    _write_back(raw, ending, target / "written")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    for scenario in args.scenarios or list(SCENARIOS):
        make(scenario, args.out)


if __name__ == "__main__":
    main()
