"""A fake but realistic results tree, so selection/ensembling/postprocessing tests need no training.

Six cases of shape (6, 10, 10), labels background/a/b, five folds (fold 0 validates two cases).
Each configuration is a function ``(case_index, gt) -> probabilities`` (float32 ``(3, z, y, x)``);
its validation folder gets what the trainer writes: ``{case}.nii.gz`` (argmax), ``{case}.npz``
('probabilities'), ``{case}.json`` (properties with ``sitk_stuff``) and ``summary.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import SimpleITK as sitk

from nnunet_core.layout.results import DatasetDirs, TrainedModel

DATASET = "Dataset901_Fake"
FILE_ENDING = ".nii.gz"
SHAPE = (6, 10, 10)
NUM_CLASSES = 3
CASES = [f"case_{i}" for i in range(6)]
SPLITS = [
    {"train": [c for c in CASES if c not in val], "val": val}
    for val in (CASES[:2], CASES[2:3], CASES[3:4], CASES[4:5], CASES[5:6])
]
SPACING = (1.0, 1.0, 2.0)  # ITK order (x, y, z)
ORIGIN = (3.0, -2.0, 7.5)
DATASET_JSON = {
    "channel_names": {"0": "CT"},
    "labels": {"background": 0, "a": 1, "b": 2},
    "numTraining": len(CASES),
    "file_ending": FILE_ENDING,
}
LABEL1_VOXELS = 3 * 4 * 4  # the label-1 box of every reference

Predictor = Callable[[int, np.ndarray], np.ndarray]


def reference(index: int) -> np.ndarray:
    """Label 1 box (48 voxels) and a separate label 2 box (18 voxels), shifted per case."""
    seg = np.zeros(SHAPE, dtype=np.uint8)
    shift = index % 2
    seg[1:4, 1 + shift : 5 + shift, 1:5] = 1
    seg[2:4, 6:9, 6 + shift : 9 + shift] = 2
    return seg


def one_hot(seg: np.ndarray, confidence: float = 0.8) -> np.ndarray:
    """Probabilities with ``confidence`` on the label of ``seg`` and the rest spread evenly."""
    other = (1.0 - confidence) / (NUM_CLASSES - 1)
    probabilities = np.full((NUM_CLASSES, *seg.shape), other, dtype=np.float32)
    for c in range(NUM_CLASSES):
        probabilities[c][seg == c] = confidence
    return probabilities


def properties() -> dict:
    return {
        "sitk_stuff": {
            "spacing": list(SPACING),
            "origin": list(ORIGIN),
            "direction": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
        },
        "spacing": list(SPACING[::-1]),
    }


def write_seg_file(path: Path, seg: np.ndarray) -> None:
    image = sitk.GetImageFromArray(seg.astype(np.uint8))
    image.SetSpacing(SPACING)
    image.SetOrigin(ORIGIN)
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path), useCompression=True)


def read_seg_file(path: Path) -> np.ndarray:
    return sitk.GetArrayFromImage(sitk.ReadImage(str(path)))


def write_prediction(folder: Path, case: str, probabilities: np.ndarray, npz: bool = True) -> None:
    """What the trainer's validation writes for one case."""
    write_seg_file(folder / f"{case}{FILE_ENDING}", probabilities.argmax(0))
    if npz:
        np.savez_compressed(folder / f"{case}.npz", probabilities=probabilities)
        (folder / f"{case}.json").write_text(json.dumps(properties()))


def exact(_index: int, gt: np.ndarray) -> np.ndarray:
    return one_hot(gt)


def make_tree(root: Path, configs: dict[str, Predictor], npz: bool = True) -> DatasetDirs:
    """Write preprocessed/D (dataset.json, splits, plans, gt) and results/D/<model>/fold_k/."""
    dirs = DatasetDirs(DATASET, root / "results" / DATASET, root / "preprocessed" / DATASET)
    dirs.preprocessed.mkdir(parents=True, exist_ok=True)
    (dirs.preprocessed / "dataset.json").write_text(json.dumps(DATASET_JSON))
    (dirs.preprocessed / "splits_final.json").write_text(json.dumps(SPLITS))
    plans = {"plans_name": "nnUNetPlans", "configurations": {c: {} for c in configs}}
    (dirs.preprocessed / "nnUNetPlans.json").write_text(json.dumps(plans))
    for i, case in enumerate(CASES):
        write_seg_file(dirs.gt_dir / f"{case}{FILE_ENDING}", reference(i))
    for config, predict in configs.items():
        model_dir = dirs.model_dir(TrainedModel(config))
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "dataset.json").write_text(json.dumps(DATASET_JSON))
        (model_dir / "plans.json").write_text(json.dumps(plans))
        for fold, split in enumerate(SPLITS):
            validation = model_dir / f"fold_{fold}" / "validation"
            validation.mkdir(parents=True, exist_ok=True)
            for case in split["val"]:
                index = CASES.index(case)
                write_prediction(validation, case, predict(index, reference(index)), npz)
            (validation / "summary.json").write_text("{}")
    return dirs


def dice(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn)


def raw_dir(dirs: DatasetDirs) -> Path:
    """The tree's raw dataset folder (``raw/D`` beside ``results/D``)."""
    return dirs.results.parent.parent / "raw" / dirs.name


def write_raw_dataset(raw_dir: Path) -> Path:
    """The raw dataset behind the tree (for the report's qualitative examples): every case as a
    training case (``imagesTr``, ``labelsTr``) and as a labelled test case (``imagesTs``,
    ``labelsTs``), its image brighter inside each label box, on the references' grid."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    (raw_dir / "dataset.json").write_text(json.dumps(DATASET_JSON))
    ripple = np.add.outer(np.arange(SHAPE[1]), np.arange(SHAPE[2])) % 3
    for i, case in enumerate(CASES):
        seg = reference(i)
        image = sitk.GetImageFromArray((20.0 + 60.0 * seg + 5.0 * ripple).astype(np.float32))
        image.SetSpacing(SPACING)
        image.SetOrigin(ORIGIN)
        for images, labels in (("imagesTr", "labelsTr"), ("imagesTs", "labelsTs")):
            (raw_dir / images).mkdir(exist_ok=True)
            sitk.WriteImage(image, str(raw_dir / images / f"{case}_0000{FILE_ENDING}"))
            write_seg_file(raw_dir / labels / f"{case}{FILE_ENDING}", seg)
    return raw_dir
