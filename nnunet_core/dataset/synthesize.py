"""The seeded synthetic raw dataset used by the demo and the tests.

Same options and seed give identical arrays: each case draws from its own generator seeded with
``(seed, split, index)``, so adding cases never changes the existing ones. Shape and spacing vary a
little per case (the fingerprint and planner must see a distribution, not one value), and the
dataset is written to a temporary folder that is renamed onto the target only when complete.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import SimpleITK as sitk

from nnunet_core.dataset.shapes import BACKGROUND, LESION, ORGAN, make_phantom
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import current_umask, replace_folder, write_json
from nnunet_core.io.removal import remove_tree
from nnunet_core.layout.raw import DATASET_JSON, TEST_FOLDERS, TRAINING_FOLDERS, channel_file_name
from nnunet_core.layout.roots import DATASET_NAME_RE

# Not "CT" (nor another scheme name), so normalisation is ZScore as for real MR data.
CHANNEL_NAMES = ("MR", "T2", "FLAIR", "ADC")
FILE_ENDINGS = (".nii.gz", ".nii", ".mha", ".nrrd", ".png")
TRAIN, TEST = 0, 1
# NIfTI from DICOM usually has x and y flipped relative to ITK's LPS; a non-identity direction
# makes sure later stages carry the geometry through instead of assuming identity.
DIRECTION_3D = (-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class SynthOptions:
    """What to generate; ``shape`` and ``spacing`` are numpy order ((z,) y, x)."""

    num_training: int = 20
    num_test: int = 5
    shape: tuple[int, ...] = (32, 64, 64)
    spacing: tuple[float, ...] = (2.5, 0.8, 0.8)
    channels: int = 1
    two_d: bool = False
    seed: int = 0
    # Multiplies the lesion's radii; 1.0 gives the tests' and benchmarks' data exactly.
    lesion_scale: float = 1.0
    file_ending: str = ".nii.gz"
    name: str | None = None  # dataset.json "name"; None: from the output folder

    def normalized(self) -> SynthOptions:
        """Check the options; for 2-D keep the last two shape/spacing values."""
        ndim = 2 if self.two_d or len(self.shape) == 2 else 3
        if len(self.shape) not in (2, 3) or len(self.shape) < ndim:
            msg = f"--shape needs 3 values (Z Y X) or 2 with --2d, got {list(self.shape)}"
            raise ConfigurationError(msg)
        if len(self.spacing) not in (2, 3) or len(self.spacing) < ndim:
            msg = f"--spacing needs {ndim} values, got {list(self.spacing)}"
            raise ConfigurationError(msg)
        shape, spacing = tuple(self.shape[-ndim:]), tuple(self.spacing[-ndim:])
        if min(shape) < 4:
            msg = f"--shape values must be at least 4, got {list(shape)}"
            raise ConfigurationError(msg)
        if min(spacing) <= 0:
            msg = f"--spacing values must be positive, got {list(spacing)}"
            raise ConfigurationError(msg)
        if self.num_training < 1 or self.num_test < 0 or self.channels < 1:
            msg = "--num-training and --channels must be >= 1 and --num-test >= 0"
            raise ConfigurationError(msg)
        if not self.lesion_scale > 0:
            msg = f"--lesion-scale must be positive, got {self.lesion_scale}"
            raise ConfigurationError(msg)
        if self.file_ending not in FILE_ENDINGS:
            msg = (
                f"--file-ending must be one of {', '.join(FILE_ENDINGS)}, got {self.file_ending!r}"
            )
            raise ConfigurationError(msg)
        if self.file_ending == ".png" and ndim != 2:
            msg = "--file-ending .png needs --2d"
            raise ConfigurationError(msg)
        return replace(self, shape=shape, spacing=spacing, two_d=ndim == 2)


def channel_names(channels: int) -> dict[str, str]:
    return {
        str(c): CHANNEL_NAMES[c] if c < len(CHANNEL_NAMES) else f"MR{c}" for c in range(channels)
    }


def dataset_json_content(options: SynthOptions) -> dict[str, Any]:
    """``dataset.json`` of the synthetic dataset (key order kept as written)."""
    return {
        "channel_names": channel_names(options.channels),
        "labels": {"background": BACKGROUND, "organ": ORGAN, "lesion": LESION},
        "numTraining": options.num_training,
        "file_ending": options.file_ending,
        "name": options.name,
        "description": (
            f"Synthetic {'2-D' if options.two_d else '3-D'} phantoms (body, organ, lesion) "
            f"made by nnunet-core synthesize with seed {options.seed}"
        ),
        "reference": "nnunet-core",
        "licence": "CC0",
    }


def case_identifier(split: int, index: int) -> str:
    """Training cases ``synth_000...``; test cases ``synth_t000...`` (never colliding)."""
    return f"synth_{index:03d}" if split == TRAIN else f"synth_t{index:03d}"


def _case_rng(seed: int, split: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, split, index]))


def _case_geometry(
    rng: np.random.Generator, options: SynthOptions
) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...]]:
    """Per-case shape (about -12%..+12%), spacing (about +-8%) and origin, numpy order."""
    base = np.asarray(options.shape)
    jitter = np.maximum(1, base // 8)
    shape = tuple(
        int(max(4, n + rng.integers(-j, j + 1))) for n, j in zip(base, jitter, strict=True)
    )
    spacing = tuple(float(round(s * rng.uniform(0.92, 1.08), 4)) for s in options.spacing)
    origin = tuple(
        float(round(-0.5 * n * s + rng.uniform(-5.0, 5.0), 3))
        for n, s in zip(shape, spacing, strict=True)
    )
    return shape, spacing, origin


def _to_itk(
    array: np.ndarray, spacing: tuple[float, ...], origin: tuple[float, ...], png: bool
) -> sitk.Image:
    if png:
        array = np.clip(np.rint(array), 0, 255).astype(np.uint8)
    image = sitk.GetImageFromArray(array)
    if not png:
        image.SetSpacing(spacing[::-1])
        image.SetOrigin(origin[::-1])
        image.SetDirection(DIRECTION_3D if array.ndim == 3 else (1.0, 0.0, 0.0, 1.0))
    return image


def write_case(folder: Path, options: SynthOptions, split: int, index: int) -> dict[str, Any]:
    """Write one case's channels and label; return its id, shape, spacing and label counts."""
    rng = _case_rng(options.seed, split, index)
    shape, spacing, origin = _case_geometry(rng, options)
    phantom = make_phantom(rng, shape, options.channels, options.lesion_scale)
    identifier = case_identifier(split, index)
    images_dir, labels_dir = TRAINING_FOLDERS if split == TRAIN else TEST_FOLDERS
    png = options.file_ending == ".png"
    for channel, array in enumerate(phantom.images):
        path = folder / images_dir / channel_file_name(identifier, channel, options.file_ending)
        sitk.WriteImage(_to_itk(array, spacing, origin, png), str(path), useCompression=True)
    label_path = folder / labels_dir / f"{identifier}{options.file_ending}"
    sitk.WriteImage(
        _to_itk(phantom.label, spacing, origin, png), str(label_path), useCompression=True
    )
    counts = np.bincount(phantom.label.ravel(), minlength=3)
    return {
        "identifier": identifier,
        "shape": shape,
        "spacing": spacing,
        "voxels_per_label": counts.tolist(),
    }


def write_dataset(folder: Path, options: SynthOptions) -> list[dict[str, Any]]:
    """Write every file of the dataset into an existing (empty) ``folder``."""
    for sub in (*TRAINING_FOLDERS, *TEST_FOLDERS):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    cases = [write_case(folder, options, TRAIN, i) for i in range(options.num_training)]
    cases += [write_case(folder, options, TEST, i) for i in range(options.num_test)]
    write_json(folder / DATASET_JSON, dataset_json_content(options))
    return cases


def dataset_name_part(output: Path) -> str:
    """``Dataset900_Synth`` -> ``Synth``; any other folder name is used as is."""
    match = DATASET_NAME_RE.match(output.name)
    return match.group(2) if match else output.name


def write_folder_atomically(
    output: Path, force: bool, write: Callable[[Path], list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Run ``write`` on a fresh sibling of ``output`` and rename it onto ``output`` only when it
    returns, so a crash or a bad option never leaves a half-written dataset; refuse a non-empty
    ``output`` unless ``force``."""
    if output.exists() and not output.is_dir():
        msg = f"{output}: exists and is not a folder"
        raise ConfigurationError(msg)
    if output.is_dir() and any(output.iterdir()) and not force:
        msg = f"{output}: folder exists and is not empty; pass --force to replace it"
        raise ConfigurationError(msg)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent))
    os.chmod(staging, 0o777 & ~current_umask())  # mkdtemp makes 0700; the dataset is shared
    try:
        cases = write(staging)
        replace_folder(staging, output)
    finally:
        remove_tree(staging, inside=[output.parent])
    return cases


def synthesize_dataset(
    output: str | os.PathLike, options: SynthOptions, force: bool = False
) -> list[dict[str, Any]]:
    """Generate the dataset into ``output`` atomically; refuse a non-empty folder unless
    ``force``."""
    output = Path(output)
    options = replace(options.normalized(), name=options.name or dataset_name_part(output))
    return write_folder_atomically(output, force, lambda staging: write_dataset(staging, options))
