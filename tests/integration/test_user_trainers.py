"""Users' own trainers through the real CLI: each example of ``examples/`` trains a fold named by
its file's path (a copy outside the repository), records itself in the model folder and
predicts; broken trainer code is one line naming trainer, file and line, exit 2.

The workflow runs (2 folds, selection, export, install after deleting the file) are in
test_workflow_user_trainer.py.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from tests.helpers.training import CONFIG, DATASET, check, cli
from tests.helpers.user_trainers import (
    EXAMPLES,
    by_path,
    copy_examples,
    example_file,
    recorded_from_file,
)
from tests.helpers.workflow import predict_workflow

TINY = ("--epochs", "1", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0")
# the refused-then-consented pair for one example: the consent check is the same code for every
# model that carries its trainer's code (a refusal costs a process that imports torch)
CONSENT_REFUSED = "FocalDiceTrainer"
# the schedule example's own schedule (the trainer makes it 2 epochs of 4 iterations),
# deterministic: its fold is the uninterrupted run that the stop-and-continue test compares with
SCHEDULE = {"ShortScheduleTrainer": ("--epochs", "8", "--deterministic")}


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The examples copied to a folder outside the repository (as a user's own files)."""
    return copy_examples(tmp_path_factory.mktemp("my_trainers"))


def model_dir(env: dict[str, str], trainer: str) -> Path:
    return Path(env["nnUNet_results"]) / DATASET / f"{trainer}__nnUNetPlans__{CONFIG}"


def train(env: dict[str, str], name: str, *extra: str):
    return cli(env, "train", "900", CONFIG, "0", "-tr", name, "-device", "cpu", *TINY, *extra)


@pytest.fixture(scope="module")
def trained(env: dict[str, str], outside: Path) -> dict[str, Path]:
    """Fold 0 of every example, trained by its file path (the schedule example: ``SCHEDULE``)."""
    folders = {}
    for trainer in EXAMPLES:
        check(train(env, by_path(outside, trainer), *SCHEDULE.get(trainer, ())))
        folders[trainer] = model_dir(env, trainer)
    return folders


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(EXAMPLES))
def test_an_example_trains_records_itself_and_predicts(
    env: dict[str, str], outside: Path, trained: dict[str, Path], trainer: str, tmp_path: Path
) -> None:
    import torch

    folder = trained[trainer]
    source = example_file(outside, trainer)
    state = torch.load(folder / "fold_0" / "checkpoint_final.pth", weights_only=False)
    assert state["trainer_name"] == trainer  # upstream's key: the class name
    assert state["settings"]["trainer_name"] == f"{source}:{trainer}"
    record = recorded_from_file(folder, trainer, source)
    assert (folder / "fold_0" / "validation" / "summary.json").is_file()
    images = tmp_path / "images"
    images.mkdir()
    case = sorted((Path(env["nnUNet_raw"]) / DATASET / "imagesTr").glob("*.nii.gz"))[0]
    shutil.copy(case, images)
    out = tmp_path / "out"
    args = ["predict", "-i", str(images), "-o", str(out), "-d", "900", "-c", CONFIG, "-f", "0"]
    flags = ("-tr", trainer, "-device", "cpu", "-npp", "1", "-nps", "1")
    if trainer == CONSENT_REFUSED:
        refused = cli(env, *args, *flags)  # the model carries the trainer's code: consent first
        assert refused.returncode == 2, refused.stderr
        assert "pass --trust-model-code" in refused.stderr, refused.stderr
        assert not out.exists()
    result = check(cli(env, *args, *flags, "--trust-model-code"))
    assert f"{folder / record['source']} (sha256 {record['sha256']})" in result.stderr
    assert (out / case.name.replace("_0000", "")).is_file()


@pytest.mark.slow
def test_the_schedule_hooks_change_epochs_iterations_and_learning_rate(
    trained: dict[str, Path],
) -> None:
    log = "".join(p.read_text() for p in (trained["ShortScheduleTrainer"] / "fold_0").glob("*.txt"))
    assert "2 epochs x 4 iterations" in log  # --epochs 8 --iterations 2: a quarter, twice
    assert "Current learning rate: 0.00500" in log  # warm-up: half the initial rate at epoch 0
    provenance = json.loads(
        (trained["ShortScheduleTrainer"] / "fold_0" / "provenance.json").read_text()
    )
    ran = provenance["config"]["trainer"]  # what the report's methods text reads
    assert (ran["num_epochs"], ran["num_iterations"]) == (2, 4)
    hooks = ["training_transform", "set_learning_rate", "adjust_schedule"]
    assert provenance["config"]["trainer_hooks"] == hooks


def weights(fold_folder: Path) -> dict:
    import torch

    return torch.load(fold_folder / "checkpoint_final.pth", weights_only=True)["network_weights"]


@pytest.mark.slow
def test_stop_and_continue_is_bit_exact_with_a_user_trainer(
    env: dict[str, str], outside: Path, trained: dict[str, Path], tmp_path: Path
) -> None:
    """The schedule example (its own lr and augmentation hooks) stopped by a deadline after
    epoch 0 and continued with --c ends with the uninterrupted run's weights, bit for bit (the
    ``trained`` fold: the same command, schedule and --deterministic, without the stop)."""
    import torch

    name = by_path(outside, "ShortScheduleTrainer")
    schedule = SCHEDULE["ShortScheduleTrainer"]
    stopped = tmp_path / "stopped"
    # a margin longer than the time to the deadline: it stops after the first epoch
    deadline = ["--deadline", "3600", "--stop-margin", "1e7"]
    first = train(env, name, *schedule, "--results", str(stopped), *deadline)
    assert first.returncode == EXIT_STOPPED, first.stdout + first.stderr
    assert "stopped at epoch 0 by deadline" in first.stdout
    check(train(env, name, *schedule, "--results", str(stopped), "--c"))
    folder = f"{DATASET}/ShortScheduleTrainer__nnUNetPlans__{CONFIG}/fold_0"
    a = weights(trained["ShortScheduleTrainer"] / "fold_0")
    b = weights(stopped / folder)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# -num_gpus 2 with a user trainer by file path: test_fine_tuning_cli.py's [ddp] case


def as_shared(archive: Path, shared: Path) -> Path:
    """``archive`` as a colleague's: its record names a trainer file this machine lacks."""
    with zipfile.ZipFile(archive) as source, zipfile.ZipFile(shared, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("/trainer.json"):
                record = json.loads(data)
                record["original_file"] = "/home/colleague/trainers/focal_dice.py"
                data = json.dumps(record).encode()
            target.writestr(info, data)
    return shared


@pytest.mark.slow
def test_the_workflow_runs_a_shared_models_code_only_with_consent(
    env: dict[str, str], trained: dict[str, Path], tmp_path: Path
) -> None:
    """Segmenting new scans (config ``predict:``) with a colleague's zip that carries trainer
    code: refused before any job in one line naming the file and its sha256, run with
    ``trust_model_code: true``."""
    archive = tmp_path / "model.zip"
    check(cli(env, "export-model-to-zip", "-d", "900", "-c", CONFIG, "-f", "0",
              "-tr", CONSENT_REFUSED, "-o", str(archive)))  # fmt: skip
    shared = as_shared(archive, tmp_path / "shared.zip")
    images = tmp_path / "images"
    images.mkdir()
    case = sorted((Path(env["nnUNet_raw"]) / DATASET / "imagesTr").glob("*.nii.gz"))[0]
    shutil.copy(case, images)
    predict = {"model": shared, "input": images, "output": tmp_path / "out"}
    record = json.loads((trained[CONSENT_REFUSED] / "trainer.json").read_text())
    refused = predict_workflow(tmp_path, predict)
    assert refused.returncode == 2, refused.stderr[-2000:]
    line = next(x for x in refused.stderr.splitlines() if "carries trainer code" in x)
    assert f"sha256 {record['sha256']}" in line and "predict.trust_model_code: true" in line
    assert not (tmp_path / "out").exists()
    ran = predict_workflow(tmp_path, {**predict, "trust_model_code": "true"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    (log,) = (tmp_path / "work" / "logs" / "new_scans").glob("predict_shard_*.log")
    assert f"(sha256 {record['sha256']}) (predict.trust_model_code: true given)" in log.read_text()
    assert (tmp_path / "out" / case.name.replace("_0000", "")).is_file()
