"""Trainer variants and the printed inference instructions, on tiny real trainings.

conftest's tiny preprocessed dataset (6 training cases, a ``3d_tiny`` configuration, built once
per test run with the real commands) is copied, with one test image added, into a working
directory whose roots are *relative* (``raw``, ``preprocessed``, ``results``), as the workflow
runs them. Fold 0 is trained three times with a few iterations:
``nnUNetTrainer_2epochs_NoMirroring``, ``nnUNetTrainer_1epoch`` and
``nnUNetTrainerNoDeepSupervision`` (``--epochs 1``). The checks: the schedule, the mirroring and
the deep supervision of each name reach the checkpoint, the loader and ``predict``;
``find-best-config`` writes instructions whose commands run as printed from that directory
(with no ``nnUNet_*`` variables set), replacing only the upper-case placeholders.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nnunet_core import cli
from nnunet_core.layout.roots import Roots
from nnunet_core.model.upstream_names import our_state_dict

pytestmark = pytest.mark.slow

DATASET = "Dataset900_Synth"
CONFIG = "3d_tiny"
NO_MIRROR = "nnUNetTrainer_2epochs_NoMirroring"
ONE_EPOCH = "nnUNetTrainer_1epoch"
NO_DS = "nnUNetTrainerNoDeepSupervision"
SCHEDULE = ["--iterations", "2", "--val-iterations", "1", "--num-workers", "0"]
ROOT_ENV = ("nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results")


def bare_env() -> dict[str, str]:
    """The environment without nnU-Net's root variables (the printed commands must not need
    them)."""
    env = {k: v for k, v in os.environ.items() if k not in ROOT_ENV}
    return {**env, "OMP_NUM_THREADS": "1"}


def run(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "nnunet_core", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"{args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def workdir(
    tmp_path_factory: pytest.TempPathFactory, tiny_training_template: Path, make_raw_dataset
) -> Path:
    """A working directory with relative roots: conftest's tiny ``3d_tiny`` dataset (copied),
    one test image, and the trainings."""
    root = tmp_path_factory.mktemp("variants")
    shutil.copytree(tiny_training_template, root, dirs_exist_ok=True)
    extra = tmp_path_factory.mktemp("test_image") / DATASET
    (test_image,) = (make_raw_dataset(extra, num_training=1, num_test=1) / "imagesTs").iterdir()
    (root / "raw" / DATASET / "imagesTs").mkdir(exist_ok=True)
    shutil.copy(test_image, root / "raw" / DATASET / "imagesTs")
    # the narrow network these checks need ([4] per stage, not the template's 4..32): a plan
    # with the real command, in this process (the 3d_tiny data stays valid: same patch and
    # spacing)
    plans = json.loads((root / "preprocessed" / DATASET / "nnUNetPlans.json").read_text())
    n_stages = plans["configurations"]["3d_fullres"]["architecture"]["arch_kwargs"]["n_stages"]
    tiny = {
        "inherits_from": "3d_fullres",
        "architecture": {"arch_kwargs": {"features_per_stage": [4] * n_stages}},
    }
    roots = ["--raw", str(root / "raw"), "--preprocessed", str(root / "preprocessed")]
    overrides = ["--overrides", json.dumps({CONFIG: tiny})]
    assert cli.main(["plan", "-d", "900", *roots, *overrides]) == 0
    env = {**bare_env(), **dict(zip(ROOT_ENV, ("raw", "preprocessed", "results"), strict=True))}
    train = ["train", "900", CONFIG, "0", "-device", "cpu", *SCHEDULE]
    run(root, env, *train, "-tr", NO_DS, "--epochs", "1")
    for trainer in (NO_MIRROR, ONE_EPOCH):
        run(
            root,
            env,
            "train",
            "900",
            CONFIG,
            "0",
            "-tr",
            trainer,
            "-device",
            "cpu",
            "--npz",
            *SCHEDULE,
        )
    return root


def model_dir(workdir: Path, trainer: str) -> Path:
    return workdir / "results" / DATASET / f"{trainer}__nnUNetPlans__{CONFIG}"


def test_the_names_set_the_epochs_and_the_stored_mirror_axes(workdir: Path) -> None:
    no_mirror = torch.load(
        model_dir(workdir, NO_MIRROR) / "fold_0/checkpoint_final.pth", weights_only=True
    )
    one = torch.load(
        model_dir(workdir, ONE_EPOCH) / "fold_0/checkpoint_final.pth", weights_only=True
    )
    assert no_mirror["current_epoch"] == 2 and len(no_mirror["logging"]["train_losses"]) == 2
    assert one["current_epoch"] == 1 and len(one["logging"]["train_losses"]) == 1
    assert no_mirror["inference_allowed_mirroring_axes"] is None
    assert one["inference_allowed_mirroring_axes"] == [0, 1, 2]
    assert no_mirror["trainer_name"] == NO_MIRROR


def test_no_mirroring_reaches_the_loader_and_the_predictor(workdir: Path) -> None:
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.inference.model_folder import load_trained_model
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots.from_env(workdir / "raw", workdir / "preprocessed", workdir / "results")
    setup = prepare_fold(roots, DATASET, CONFIG, 0, "nnUNetPlans", NO_MIRROR)
    setup = dataclasses.replace(setup, output_folder=workdir / "scratch")
    for name, expected in ((NO_MIRROR, ()), ("nnUNetTrainer", (0, 1, 2))):
        settings = TrainerSettings(num_workers=0, trainer_name=name)
        trainer = Trainer(setup, settings, torch.device("cpu"))
        train_loader, _ = trainer._loaders()
        assert train_loader.transform.mirror_axes == expected
    assert load_trained_model(model_dir(workdir, NO_MIRROR), [0]).mirror_axes is None
    assert load_trained_model(model_dir(workdir, ONE_EPOCH), [0]).mirror_axes == (0, 1, 2)


def _probabilities(workdir: Path, trainer: str, *extra: str, model_folder: bool = False):
    images = str(Path("raw") / DATASET / "imagesTs")
    out = f"pred_{trainer}_{'m' if model_folder else 'd'}_{'_'.join(extra) or 'tta'}"
    if model_folder:  # upstream's nnUNetv2_predict_from_modelfolder spelling
        model = ["-m", str(model_dir(workdir, trainer).relative_to(workdir))]
    else:
        model = ["-d", DATASET, "-c", CONFIG, "-tr", trainer, "--results", "results"]
    flags = ["-f", "0", "-npp", "0", "-nps", "0", "-device", "cpu", "--save_probabilities"]
    run(workdir, bare_env(), "predict", "-i", images, "-o", out, *model, *flags, *extra)
    (npz,) = sorted((workdir / out).glob("*.npz"))
    return np.load(npz)["probabilities"]


def test_predict_of_a_no_mirroring_model_does_no_test_time_mirroring(workdir: Path) -> None:
    """TTA on or off gives the same output for a NoMirroring model (and not for a mirroring one);
    ``-m MODEL_FOLDER`` predicts with the same model as ``-d -c -tr``."""
    with_tta = _probabilities(workdir, NO_MIRROR)
    without = _probabilities(workdir, NO_MIRROR, "--disable_tta", model_folder=True)
    np.testing.assert_array_equal(with_tta, without)
    mirrored = _probabilities(workdir, ONE_EPOCH)
    assert not np.array_equal(mirrored, _probabilities(workdir, ONE_EPOCH, "--disable_tta"))


def _commands(text: str) -> list[list[str]]:
    return [shlex.split(line) for line in text.splitlines() if line.startswith("nnunet-core ")]


def _run_instructions(workdir: Path, text: str, tag: str) -> Path:
    """Run every printed command from ``workdir``, replacing only the placeholders."""
    images = str(Path("raw") / DATASET / "imagesTs")
    commands = _commands(text)
    assert commands and all("INPUT_FOLDER" in c for c in commands if c[1] == "predict")
    for command in commands:
        replaced = [
            images if a == "INPUT_FOLDER" else f"{tag}_{a}" if a.startswith("OUTPUT_FOLDER") else a
            for a in command
        ]
        run(
            workdir,
            bare_env(),
            *replaced[1:],
            *(["-device", "cpu"] if command[1] == "predict" else []),
        )
    return workdir / f"{tag}_OUTPUT_FOLDER_PP"


def test_printed_instructions_run_as_printed(workdir: Path, monkeypatch) -> None:
    from nnunet_core.commands.find_best_config import root_flags
    from nnunet_core.evaluation.selection import inference_instructions
    from nnunet_core.layout.results import DatasetDirs

    env = {**bare_env(), **dict(zip(ROOT_ENV, ("raw", "preprocessed", "results"), strict=True))}
    models = ["-c", CONFIG, "-tr", NO_MIRROR, ONE_EPOCH, "-f", "0", "-np", "1"]
    run(workdir, env, "find-best-config", DATASET, *models)  # upstream's positional dataset
    results = workdir / "results" / DATASET
    text = (results / "inference_instructions.txt").read_text()
    assert "--raw raw --preprocessed preprocessed --results results" in text
    assert "INPUT_FOLDER" in text and "OUTPUT_FOLDER_PP" in text
    final = _run_instructions(workdir, text, "printed")
    assert len(list(final.glob("*.nii.gz"))) == 1

    # the ensemble form of the instructions, whatever won here
    info = json.loads((results / "inference_information.json").read_text())
    best = info["best_model_or_ensemble"]
    best["selected_model_or_models"] = [
        {"configuration": CONFIG, "trainer": t, "plans_identifier": "nnUNetPlans"}
        for t in (NO_MIRROR, ONE_EPOCH)
    ]
    monkeypatch.chdir(workdir)
    roots = Roots.from_env("raw", "preprocessed", "results")
    dirs = DatasetDirs(DATASET, Path("results") / DATASET, Path("preprocessed") / DATASET)
    text = inference_instructions(info, dirs, 1, root_flags(roots))
    assert "nnunet-core ensemble -i" in text and text.count("--save_probabilities") == 2
    final = _run_instructions(workdir, text, "ensembled")
    assert len(list(final.glob("*.nii.gz"))) == 1


def test_no_deep_supervision_trains_only_the_full_resolution_head(workdir: Path) -> None:
    """The lower heads get no gradient (their weights stay at the seeded start); the last one
    learns."""
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots.from_env(workdir / "raw", workdir / "preprocessed", workdir / "results")
    setup = prepare_fold(roots, DATASET, CONFIG, 0, "nnUNetPlans", NO_DS)
    setup = dataclasses.replace(setup, output_folder=workdir / "scratch_ds")
    fresh = Trainer(setup, TrainerSettings(num_workers=0, trainer_name=NO_DS), torch.device("cpu"))
    assert fresh.ds_scales is None and fresh.network.deep_supervision is False
    start = fresh.network.state_dict()
    final = torch.load(model_dir(workdir, NO_DS) / "fold_0/checkpoint_final.pth", weights_only=True)
    assert final["current_epoch"] == 1 and final["trainer_name"] == NO_DS
    weights = our_state_dict(final["network_weights"])
    heads = sorted({k.rsplit(".", 1)[0] for k in weights if k.startswith("decoder.heads.")})
    assert len(heads) >= 2
    for head in heads[:-1]:
        assert torch.equal(weights[f"{head}.weight"], start[f"{head}.weight"]), head
    assert not torch.equal(weights[f"{heads[-1]}.weight"], start[f"{heads[-1]}.weight"])
    assert (model_dir(workdir, NO_DS) / "fold_0/validation/summary.json").is_file()


def test_no_deep_supervision_trains_under_ddp(workdir: Path) -> None:
    """Two gloo ranks: the idle lower heads must not stall DDP's gradient reduction."""
    env = {**bare_env(), **dict(zip(ROOT_ENV, ("raw", "preprocessed", "results"), strict=True))}
    args = ["train", "900", CONFIG, "1", "-tr", NO_DS, "-device", "cpu", "-num_gpus", "2"]
    run(workdir, env, *args, "--epochs", "1", *SCHEDULE)
    final = torch.load(model_dir(workdir, NO_DS) / "fold_1/checkpoint_final.pth", weights_only=True)
    assert final["current_epoch"] == 1


def test_the_trainer_takes_its_augmentation_from_the_name(workdir: Path) -> None:
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.training.augmentation import configure_augmentation
    from nnunet_core.training.fold.setup import prepare_fold

    name = "nnUNetTrainer_noDummy2DDA"
    roots = Roots.from_env(workdir / "raw", workdir / "preprocessed", workdir / "results")
    setup = prepare_fold(roots, DATASET, CONFIG, 0, "nnUNetPlans", name)
    setup = dataclasses.replace(setup, output_folder=workdir / "scratch_aug")
    trainer = Trainer(setup, TrainerSettings(num_workers=0, trainer_name=name), torch.device("cpu"))
    assert trainer.augmentation == configure_augmentation(trainer.patch_size, allow_dummy_2d=False)
    assert not trainer.augmentation.do_dummy_2d
