"""A small fake-but-valid trained results tree for the model archive tests (no training).

``make_results(root)`` writes, for ``Dataset901_Fake`` with nnUNetTrainer / nnUNetPlans, the
configurations ``3d_fullres`` and ``2d`` with fold 0 each: what a training leaves (checkpoint
saved with ``torch.save``, progress.png, debug.json, validation folder with a segmentation,
probabilities, properties and summary.json), the model files (plans, dataset.json, fingerprint),
a crossval folder, an ensemble of the two and inference_information.json. ``UPSTREAM_LAYOUT``
is the member list upstream's exporter writes for it (``-c 3d_fullres 2d -f 0``), in its order.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import torch

DATASET = "Dataset901_Fake"
KEEP_LARGEST = "remove_all_but_largest_component_from_segmentation"
CONFIGURATIONS = ("3d_fullres", "2d")
MODELS = {c: f"nnUNetTrainer__nnUNetPlans__{c}" for c in CONFIGURATIONS}
ENSEMBLE = f"ensemble___{MODELS['3d_fullres']}___{MODELS['2d']}___0"
DATASET_JSON = {
    "channel_names": {"0": "CT"},
    "labels": {"background": 0, "a": 1},
    "numTraining": 2,
    "file_ending": ".nii.gz",
}
FOLD_FILES = (
    "debug.json",
    "checkpoint_final.pth",
    "checkpoint_best.pth",
    "progress.png",
    "validation/case_0.nii.gz",
    "validation/case_0.npz",
    "validation/case_0.json",
    "validation/summary.json",
)


def _json(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=4))


def _fold(folder: Path, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    for name in ("checkpoint_final.pth", "checkpoint_best.pth"):
        weights = {"encoder.weight": torch.randn(4, 2, generator=generator)}
        torch.save({"network_weights": weights, "current_epoch": 3}, folder / name)
    _json(folder / "debug.json", {"seed": seed})
    (folder / "progress.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    validation = folder / "validation"
    validation.mkdir()
    (validation / "case_0.nii.gz").write_bytes(b"not really nifti " * 8)
    (validation / "case_0.npz").write_bytes(b"probabilities " * 8)
    _json(validation / "case_0.json", {"spacing": [1, 1, 1]})
    _json(validation / "summary.json", {"foreground_mean": {"Dice": 0.5 + seed / 10}})


def make_results(root: Path) -> Path:
    """The results tree under ``root`` (returned); see the module docstring."""
    results = root / DATASET
    for seed, (configuration, model) in enumerate(MODELS.items()):
        model_dir = results / model
        plans = {"dataset_name": DATASET, "plans_name": "nnUNetPlans", "configurations": {}}
        plans["configurations"][configuration] = {"data_identifier": f"nnUNetPlans_{configuration}"}
        _json(model_dir / "plans.json", plans)
        _json(model_dir / "dataset.json", DATASET_JSON)
        _json(model_dir / "dataset_fingerprint.json", {"spacings": [[1.0, 1.0, 1.0]]})
        _fold(model_dir / "fold_0", seed)
        crossval = model_dir / "crossval_results_folds_0"
        _json(crossval / "summary.json", {"foreground_mean": {"Dice": 0.5}})
        # upstream's keys, one accepted step (keep the largest component of label 1)
        steps = {
            "postprocessing_fns": [KEEP_LARGEST],
            "postprocessing_kwargs": [{"labels_or_regions": [1]}],
        }
        _json(crossval / "postprocessing.json", steps)
        (crossval / "case_0.nii.gz").write_bytes(b"merged prediction")
    ensemble = results / "ensembles" / ENSEMBLE
    _json(ensemble / "summary.json", {"foreground_mean": {"Dice": 0.6}})
    (ensemble / "case_0.nii.gz").write_bytes(b"ensembled prediction")
    _json(results / "inference_information.json", {"best_model_or_ensemble": {}})
    return root


def _model_layout(configuration: str, checkpoints: tuple[str, ...]) -> list[str]:
    model = f"{DATASET}/{MODELS[configuration]}"
    fold = f"{model}/fold_0"
    return [
        f"{fold}/debug.json",
        *(f"{fold}/{name}" for name in checkpoints),
        f"{fold}/progress.png",
        f"{fold}/validation/summary.json",
        f"{model}/crossval_results_folds_0/summary.json",
        f"{model}/crossval_results_folds_0/postprocessing.pkl",  # made from the JSON
        f"{model}/crossval_results_folds_0/postprocessing.json",
        f"{model}/plans.json",
        f"{model}/dataset_fingerprint.json",
        f"{model}/dataset.json",
    ]


# upstream's member list for `-c 3d_fullres 2d -f 0` (default -chk checkpoint_final.pth)
UPSTREAM_LAYOUT = [
    *_model_layout("3d_fullres", ("checkpoint_final.pth",)),
    *_model_layout("2d", ("checkpoint_final.pth",)),
    f"{DATASET}/ensembles/{ENSEMBLE}/summary.json",
    f"{DATASET}/inference_information.json",
]


def members(archive: Path) -> list[str]:
    with zipfile.ZipFile(archive) as handle:
        return handle.namelist()


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` by its posix path relative to ``root``, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
