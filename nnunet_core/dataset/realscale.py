"""Seeded synthetic raw datasets at the size users bring: CT-like abdomens and MR-like brains.

The demo's phantoms (``synthesize``) are 32 x 64 x 64; speed and memory at that size say nothing
about a 512 x 512 x 100 CT, where the planner adds 3d_lowres and the cascade and every stage
handles 100 MB per channel. ``ct``: 512 x 512 x N (N 80-120 per case unless ``slices`` fixes it)
at about 0.7 x 0.7 x 2.5 mm (in-plane spacing 0.68-0.78 mm per case, as scanners' fields of view
vary), int16 Hounsfield units, channel "CT" so that the CT normalisation is planned. ``mr``:
whole T1-like heads of 256^3 at 1 mm with a noisy background, int16, channel "T1" (z-score), planned
with 128^3 patches and 3d_lowres. Labels: background 0, organ 1 (the MR's ventricles), lesion 2.

Same arguments give identical arrays: each case draws from its own generator seeded with
``(seed, split, index)``, so adding cases never changes the existing ones. The dataset is written
to a temporary sibling folder that is renamed onto the target only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from nnunet_core.dataset.realscale_volumes import Volume, ct_abdomen, mr_head
from nnunet_core.dataset.shapes import BACKGROUND, LESION, ORGAN
from nnunet_core.dataset.synthesize import (
    DIRECTION_3D,
    TEST,
    TRAIN,
    dataset_name_part,
    write_folder_atomically,
)
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import write_json
from nnunet_core.layout.raw import DATASET_JSON, TEST_FOLDERS, TRAINING_FOLDERS, channel_file_name

FILE_ENDING = ".nii.gz"
# gzip level 1: a noisy int16 volume compresses barely better at 6, and three times slower
COMPRESSION_LEVEL = 1
MIN_SLICES = 8


@dataclass(frozen=True)
class Preset:
    """One kind of real-size data; shapes and spacings in numpy order (z, y, x)."""

    name: str
    channel: str
    description: str
    make: Callable[[np.random.Generator, tuple[int, int, int], tuple[float, float, float]], Volume]


PRESETS: dict[str, Preset] = {
    "ct": Preset(
        "ct",
        "CT",
        "CT-like abdomens, 512 x 512 x N at ~0.7 x 0.7 x 2.5 mm, int16 HU (air, fat, soft tissue, "
        "bone, organ, lesion)",
        ct_abdomen,
    ),
    "mr": Preset(
        "mr",
        "T1",
        "MR-like heads (T1-like: scalp, skull, brain, ventricles, lesion), 256^3 at 1 mm, int16",
        mr_head,
    ),
}


def case_identifier(preset: str, split: int, index: int) -> str:
    """Training cases ``ct_000...``; test cases ``ct_t000...`` (never colliding)."""
    return f"{preset}_{index:03d}" if split == TRAIN else f"{preset}_t{index:03d}"


def case_geometry(
    preset: str, rng: np.random.Generator, slices: int | None
) -> tuple[tuple[int, int, int], tuple[float, float, float]]:
    """A case's shape and spacing (numpy order): CT's slice count and in-plane pixel size vary
    per case as between patients and scanners; MR's are the usual 256^3 at 1 mm."""
    if preset == "mr":
        return (256, 256, 256), (1.0, 1.0, 1.0)
    count = int(rng.integers(80, 121))
    pixel = float(round(rng.uniform(0.68, 0.78), 4))
    return (slices or count, 512, 512), (2.5, pixel, pixel)


def case_volume(
    preset: str, seed: int, split: int, index: int, slices: int | None = None
) -> tuple[Volume, tuple[float, float, float]]:
    """The arrays and spacing of one case, without writing it (for tests and benchmarks)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, split, index]))
    shape, spacing = case_geometry(preset, rng, slices)
    return PRESETS[preset].make(rng, shape, spacing), spacing


def _itk(array: np.ndarray, spacing: tuple[float, float, float]) -> sitk.Image:
    image = sitk.GetImageFromArray(array)
    image.SetSpacing(spacing[::-1])
    # the volume centred on the scanner's origin, as a reconstruction places it
    image.SetOrigin(
        tuple(-0.5 * n * s for n, s in zip(array.shape[::-1], spacing[::-1], strict=True))
    )
    image.SetDirection(DIRECTION_3D)
    return image


def write_case(
    folder: Path, preset: str, seed: int, split: int, index: int, slices: int | None
) -> dict[str, Any]:
    """Write one case's image and label; return its id, shape, spacing and label counts."""
    volume, spacing = case_volume(preset, seed, split, index, slices)
    identifier = case_identifier(preset, split, index)
    images_dir, labels_dir = TRAINING_FOLDERS if split == TRAIN else TEST_FOLDERS
    for array, path in (
        (volume.image, folder / images_dir / channel_file_name(identifier, 0, FILE_ENDING)),
        (volume.label, folder / labels_dir / f"{identifier}{FILE_ENDING}"),
    ):
        sitk.WriteImage(_itk(array, spacing), str(path), True, COMPRESSION_LEVEL)
    counts = np.bincount(volume.label.ravel(), minlength=3)
    return {
        "identifier": identifier,
        "shape": volume.image.shape,
        "spacing": spacing,
        "voxels_per_label": counts.tolist(),
    }


def dataset_json_content(preset: str, num_training: int, seed: int, name: str) -> dict[str, Any]:
    """``dataset.json`` of a real-size dataset (key order kept as written)."""
    return {
        "channel_names": {"0": PRESETS[preset].channel},
        "labels": {"background": BACKGROUND, "organ": ORGAN, "lesion": LESION},
        "numTraining": num_training,
        "file_ending": FILE_ENDING,
        "name": name,
        "description": (
            f"{PRESETS[preset].description}; made by nnunet-core synthesize --preset {preset} "
            f"with seed {seed}"
        ),
        "reference": "nnunet-core",
        "licence": "CC0",
    }


def check_arguments(preset: str, num_training: int, num_test: int, slices: int | None) -> None:
    """One clear line for each argument a preset cannot use."""
    if preset not in PRESETS:
        msg = f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}"
        raise ConfigurationError(msg)
    if num_training < 1 or num_test < 0:
        msg = f"--num-training must be >= 1 and --num-test >= 0, got {num_training}, {num_test}"
        raise ConfigurationError(msg)
    if slices is not None and preset != "ct":
        msg = f"--slices sets the CT slice count; preset {preset!r} is always 256^3"
        raise ConfigurationError(msg)
    if slices is not None and slices < MIN_SLICES:
        msg = f"--slices must be at least {MIN_SLICES}, got {slices}"
        raise ConfigurationError(msg)


def synthesize_realscale(
    target: str | os.PathLike,
    preset: str,
    num_training: int,
    num_test: int,
    seed: int = 0,
    slices: int | None = None,
    *,
    force: bool = False,
    name: str | None = None,
) -> Path:
    """Write a real-size raw dataset into ``target`` (``$nnUNet_raw/DatasetXXX_Name``) and return
    it; refuse a non-empty ``target`` unless ``force``. ``name``: dataset.json's (default: from
    the folder, ``Dataset950_CTLike`` -> ``CTLike``).

    >>> synthesize_realscale(raw / "Dataset950_CTLike", "ct", 3, 1, slices=48)  # doctest: +SKIP
    """
    check_arguments(preset, num_training, num_test, slices)
    target = Path(target)
    content = dataset_json_content(preset, num_training, seed, name or dataset_name_part(target))

    def write(folder: Path) -> list[dict[str, Any]]:
        for sub in (*TRAINING_FOLDERS, *TEST_FOLDERS):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        splits = [(TRAIN, i) for i in range(num_training)] + [(TEST, i) for i in range(num_test)]
        cases = [write_case(folder, preset, seed, split, i, slices) for split, i in splits]
        write_json(folder / DATASET_JSON, content)
        return cases

    write_folder_atomically(target, force, write)
    return target
