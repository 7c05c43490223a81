"""Users' own trainers through the real CLI: each example of ``examples/`` trains a fold named by
its file's path (a copy outside the repository), records itself in the model folder and
predicts; broken trainer code is one line naming trainer, file and line, exit 2.

The workflow runs (2 folds, selection, export, install after deleting the file) are in
test_workflow_user_trainer.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.paths import REPO
from tests.helpers.training import CONFIG, DATASET, check, cli

EXAMPLES = {
    "FocalDiceTrainer": "focal_dice_loss/focal_dice_trainer.py",
    "SegResNetTrainer": "segresnet/segresnet_trainer.py",
    "ShortScheduleTrainer": "short_schedule/short_schedule_trainer.py",
}
TINY = ("--epochs", "1", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0")


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples copied to a folder outside the repository (as a user's own files)."""
    folder = tmp_path_factory.mktemp("my_trainers")
    for relative in EXAMPLES.values():
        shutil.copy(REPO / "examples" / relative, folder)
    return folder


def model_dir(env: dict[str, str], trainer: str) -> Path:
    return Path(env["nnUNet_results"]) / DATASET / f"{trainer}__nnUNetPlans__{CONFIG}"


def train(env: dict[str, str], name: str, *extra: str):
    return cli(env, "train", "900", CONFIG, "0", "-tr", name, "-device", "cpu", *TINY, *extra)


@pytest.fixture(scope="module")
def trained(env: dict[str, str], outside: Path) -> dict[str, Path]:
    """Fold 0 of every example, trained by its file path."""
    folders = {}
    for trainer, relative in EXAMPLES.items():
        check(train(env, f"{outside / Path(relative).name}:{trainer}"))
        folders[trainer] = model_dir(env, trainer)
    return folders


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(EXAMPLES))
def test_an_example_trains_records_itself_and_predicts(
    env: dict[str, str], outside: Path, trained: dict[str, Path], trainer: str, tmp_path: Path
) -> None:
    import torch

    folder = trained[trainer]
    source = outside / Path(EXAMPLES[trainer]).name
    state = torch.load(folder / "fold_0" / "checkpoint_final.pth", weights_only=False)
    assert state["trainer_name"] == trainer  # upstream's key: the class name
    assert state["settings"]["trainer_name"] == f"{source}:{trainer}"
    record = json.loads((folder / "trainer.json").read_text())
    assert (record["class"], record["found_by"]) == (trainer, "file")
    assert record["original_file"] == str(source)
    assert (folder / record["source"]).read_bytes() == source.read_bytes()
    assert (folder / "fold_0" / "validation" / "summary.json").is_file()
    images = tmp_path / "images"
    images.mkdir()
    case = sorted((Path(env["nnUNet_raw"]) / DATASET / "imagesTr").glob("*.nii.gz"))[0]
    shutil.copy(case, images)
    out = tmp_path / "out"
    args = ["predict", "-i", str(images), "-o", str(out), "-d", "900", "-c", CONFIG, "-f", "0"]
    check(cli(env, *args, "-tr", trainer, "-device", "cpu", "-npp", "1", "-nps", "1"))
    assert (out / case.name.replace("_0000", "")).is_file()


@pytest.mark.slow
def test_the_schedule_hooks_change_epochs_iterations_and_learning_rate(
    trained: dict[str, Path],
) -> None:
    log = "".join(p.read_text() for p in (trained["ShortScheduleTrainer"] / "fold_0").glob("*.txt"))
    assert "1 epochs x 4 iterations" in log  # --epochs 1 --iterations 2: a quarter, twice
    assert "Current learning rate: 0.00500" in log  # warm-up: half the initial rate at epoch 0
