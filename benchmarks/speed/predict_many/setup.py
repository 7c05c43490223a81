"""What ``benchmarks.speed.predict_many`` needs before anything is timed: the cases and the model.

Synthetic: ``nnunet-core synthesize --preset ct`` writes the new scans (its test cases) and two
training cases; our planner plans 3d_fullres on those, with the features per stage divided by
``--feature-divisor`` (32: the planned network is too slow for a CPU at real size) and our
trainer writes fold 0's ``checkpoint_final.pth`` with its random initial weights (prediction costs
the same as with trained ones: same network, same tiles). The model travels as users share it:
our ``export-model-to-zip``, then each side installs the zip with its own installer (ours
``install-pretrained-model-from-zip``, upstream's ``nnUNetv2_install_pretrained_model_from_zip``),
so both predict from the same bytes. A user's ``--dataset FOLDER --model M``: the first N images
of the folder, the model a zip (installed the same way) or a model folder (used by both as it is).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.speed.realscale.setup import (
    CONFIGURATION,
    DATASET_ID,
    OUR_CHECKPOINT,
    link_dataset,
    preprocess_both,
    run,
    write_plans,
    write_splits,
)
from nnunet_core.dataset.discovery import case_identifiers
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.preprocessed import plans_file
from nnunet_core.layout.raw import DATASET_JSON, IMAGES_TS, channel_file_pattern
from nnunet_core.layout.results import fold_dirs_in, fold_of_folder, is_model_folder_name

TRAINER = "nnUNetTrainer"  # mirror axes (0, 1, 2) in the checkpoint, as users' models have
TRAINING_CASES = 2


@dataclass(frozen=True)
class Inputs:
    """The cases both sides predict and the model folder each side reads."""

    images: Path  # CASE_XXXX{ending} files, the cases to predict
    cases: tuple[str, ...]
    ending: str
    ours_model: Path
    upstream_model: Path | None  # None without the peer
    folds: tuple[str, ...]
    description: str


def _our_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "nnunet_core", *args]


def synthesize(work: Path, cases: int, slices: int | None, log) -> Path:
    """The CT-like raw dataset (reused when the same sizes made it before)."""
    target = work / "source" / f"Dataset{DATASET_ID}_PredictMany"
    marker = work / "source" / "made.json"
    sizes = {"cases": cases, "slices": slices, "training": TRAINING_CASES}
    if marker.is_file() and json.loads(marker.read_text()) == sizes:
        log(f"reusing the synthetic cases in {target}")
        return target
    marker.unlink(missing_ok=True)
    command = _our_cli("synthesize", "--preset", "ct", "--output", str(target), "--force")
    command += ["--num-training", str(TRAINING_CASES), "--num-test", str(cases)]
    command += ["--slices", str(slices)] if slices else []
    log(f"synthesizing {cases} CT-like case(s) to predict (+{TRAINING_CASES} to plan on)")
    run(command)
    marker.write_text(json.dumps(sizes))
    return target


def shrink_network(preprocessed: Path, divisor: int) -> None:
    """The planned plans with 3d_fullres' features per stage divided by ``divisor`` (>= 2)."""
    write_plans(preprocessed, False)  # the plans as planned
    plans = json.loads(plans_file(preprocessed).read_text())
    kwargs = plans["configurations"][CONFIGURATION]["architecture"]["arch_kwargs"]
    kwargs["features_per_stage"] = [max(2, f // divisor) for f in kwargs["features_per_stage"]]
    plans_file(preprocessed).write_text(json.dumps(plans, indent=1))


def synthetic_zip(raw_dataset: Path, work: Path, divisor: int, log) -> Path:
    """Plan on the training cases, write fold 0 with our trainer, export the zip (once)."""
    archive = work / "model.zip"
    if archive.is_file():
        log(f"reusing the model {archive}")
        return archive
    sides = link_dataset(raw_dataset, work, TRAINING_CASES, None)
    preprocess_both(sides, log)  # ours only (no peer): the trainer reads the preprocessed cases
    preprocessed = sides.root("ours", "pre") / sides.dataset
    shrink_network(preprocessed, divisor)
    write_splits(preprocessed, sides.cases, 1)
    log("writing fold 0 of the model (our trainer, its initial weights)")
    roots = sides.our_roots()
    run([sys.executable, "-c", OUR_CHECKPOINT, str(DATASET_ID), CONFIGURATION, "0", "-tr",
         TRAINER, "-device", "cpu", *roots])  # fmt: skip
    partial = archive.with_suffix(".partial.zip")
    run(_our_cli("export-model-to-zip", "-d", str(DATASET_ID), "-c", CONFIGURATION, "-tr",
                 TRAINER, "-f", "0", "-o", str(partial), *roots))  # fmt: skip
    partial.rename(archive)
    return archive


def _model_dir(results: Path) -> Path:
    found = [p for p in results.glob("Dataset*/*") if is_model_folder_name(p.name)]
    if len(found) != 1:
        sys.exit(f"{results}: expected one installed model folder, found {len(found)}")
    return found[0]


def install_both(archive: Path, work: Path, peer: Path | None) -> tuple[Path, Path | None]:
    """Each side installs the zip into its own results root with its own installer."""
    ours = work / "installed" / "ours"
    if not ours.is_dir():
        run(_our_cli("install-pretrained-model-from-zip", str(archive), "--results", str(ours)))
    upstream = None
    if peer is not None:
        from benchmarks.common.peer.env import peer_environment

        root = work / "installed" / "upstream"
        if not root.is_dir():
            env = peer_environment(peer, root / "raw", root / "pre", root / "results")
            run([str(peer / "bin" / "nnUNetv2_install_pretrained_model_from_zip"), str(archive)],
                env)  # fmt: skip
        upstream = _model_dir(root / "results")
    return _model_dir(ours), upstream


def model_folds(model_dir: Path) -> tuple[str, ...]:
    """The folds a model folder holds (``fold_all`` as ``all``), in order."""
    folds = tuple(fold_of_folder(p) for p in fold_dirs_in(model_dir))
    if not folds:
        sys.exit(f"{model_dir}: no fold folders (not a trained model folder)")
    return folds


def link_cases(source: Path, target: Path, ending: str, count: int | None) -> tuple[str, ...]:
    """Links to every channel file of the first ``count`` cases of ``source`` in ``target``."""
    cases = case_identifiers(source, ending)[:count]
    if not cases:
        sys.exit(f"{source}: no images named CASE_0000{ending}")
    target.mkdir(parents=True, exist_ok=True)
    pattern = channel_file_pattern(ending)
    for path in sorted(source.iterdir()):
        match = pattern.match(path.name)
        if match and match.group(1) in cases and not (target / path.name).exists():
            (target / path.name).symlink_to(path.resolve())
    return tuple(cases)


def synthetic_inputs(
    work: Path, cases: int, slices: int | None, divisor: int, peer: Path | None, log
) -> Inputs:
    raw = synthesize(work, cases, slices, log)
    model_work = work / f"model_features_div{divisor}"
    ours, upstream = install_both(synthetic_zip(raw, model_work, divisor, log), model_work, peer)
    ending = load_dataset_json(raw / DATASET_JSON).file_ending
    chosen = link_cases(raw / IMAGES_TS, work / "input", ending, cases)
    size = f"{slices} slices" if slices else "80-120 slices"
    description = (
        f"synthetic CT-like ({len(chosen)} cases of 512x512, {size}, 0.7x0.7x2.5 mm, int16 HU); "
        f"3d_fullres planned by ours on {TRAINING_CASES} training cases of the same size, "
        f"features per stage / {divisor}, fold 0 with our trainer's initial weights"
    )
    return Inputs(work / "input", chosen, ending, ours, upstream, ("0",), description)


def user_inputs(
    dataset: Path, model: Path, cases: int | None, work: Path, peer: Path | None
) -> Inputs:
    """A user's images and model; a zip is installed by each side, a folder used as it is."""
    if model.is_file():
        ours, upstream = install_both(model, work, peer)
    elif model.is_dir() and is_model_folder_name(model.name):
        ours, upstream = model.resolve(), model.resolve() if peer is not None else None
    else:
        sys.exit(f"--model {model}: neither a model zip nor a <trainer>__<plans>__<conf> folder")
    ending = load_dataset_json(ours / DATASET_JSON).file_ending
    images = dataset / IMAGES_TS if (dataset / IMAGES_TS).is_dir() else dataset
    chosen = link_cases(images, work / "input", ending, cases)
    description = f"user's images {images} ({len(chosen)} cases), model {model}"
    return Inputs(work / "input", chosen, ending, ours, upstream, model_folds(ours), description)


def git_head(repository: Path) -> str:
    done = subprocess.run(["git", "-C", str(repository), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or "unknown"
