"""A 3d_cascade_fullres fold trains, validates and continues like any other fold.

A tiny synthetic dataset planned with a small GPU memory target gets 3d_lowres and the cascade.
Both data folders are preprocessed once; a 2-fold ``splits_final.json`` lets two tiny 3d_lowres
folds write every case's previous-stage file. Cascade fold 0 then trains (2 epochs x 2
iterations, in process) uninterrupted, and again stopped by a deadline after epoch 0 and continued
with ``--c`` in a second results root holding the same previous-stage files: the final weights are
bitwise equal (CPU, one thread, batches a pure function of seed, fold, epoch and iteration).
A real ``nnunet-core train`` process of cascade fold 0 stopped by SIGUSR1 after epoch 0 exits 0
(the train rule, not the CLI, turns a stop into ``EXIT_STOPPED``) with checkpoint_latest and no
final; ``--c`` continues at the next epoch and finishes and validates.
A missing previous-stage file is one line naming the case and the 3d_lowres fold, exit 2.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nnunet_core import TrainerSettings
from nnunet_core.cli import main
from nnunet_core.cluster import stop_signal
from nnunet_core.layout.results import PREDICTED_NEXT_STAGE_FOLDER, trained_model_dir
from nnunet_core.model import checkpoint as ckpt
from tests.helpers.training import check, cli, roots_env, run_fold_in_process

pytestmark = pytest.mark.slow

DATASET = "Dataset992_CascTrain"
LOWRES, CASCADE = "3d_lowres", "3d_cascade_fullres"
# no test-time mirroring: the final validations' sliding windows are 8x cheaper on this CPU
TRAINER = "nnUNetTrainerNoMirroring"
LOWRES_SETTINGS = TrainerSettings(
    num_epochs=1, num_iterations=1, num_val_iterations=1, num_workers=0, trainer_name=TRAINER
)
SETTINGS = TrainerSettings(
    num_epochs=2, num_iterations=2, num_val_iterations=1, num_workers=0, trainer_name=TRAINER
)
STOP_AFTER_FIRST_EPOCH = {"deadline": "3600", "stop_margin": 1e7}


def run(results: Path, env: dict[str, str], configuration: str, fold: int, **flags) -> str:
    """One fold in process, stdout captured (the lowres stage with its own schedule)."""
    settings = LOWRES_SETTINGS if configuration == LOWRES else SETTINGS
    return run_fold_in_process(env, results, DATASET, configuration, fold, settings, **flags)


def model_dir(results: Path, configuration: str) -> Path:
    return trained_model_dir(results / DATASET, configuration, "nnUNetPlans", TRAINER)


def copy_previous_stage(results: Path, target: Path) -> Path:
    """The 3d_lowres folds' next-stage files in another results root; returns their folder."""
    source = model_dir(results, LOWRES) / PREDICTED_NEXT_STAGE_FOLDER
    destination = model_dir(target, LOWRES) / PREDICTED_NEXT_STAGE_FOLDER
    shutil.copytree(source, destination)
    return destination / CASCADE


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    """Preprocessed 3d_lowres + 3d_fullres, 2 folds, both 3d_lowres folds trained."""
    root = tmp_path_factory.mktemp("cascade_training")
    raw = make_raw_dataset(
        root / "raw" / DATASET, num_training=4, num_test=0, shape=(40, 48, 48), spacing=(1, 1, 1)
    )
    environment = roots_env(root)
    # the real commands in process: an interpreter start-up each costs seconds on 2 busy cores
    raw_root, preprocessed_root = environment["nnUNet_raw"], environment["nnUNet_preprocessed"]
    roots = ["--raw", raw_root, "--preprocessed", preprocessed_root]
    assert main(["fingerprint", "-d", "992", "-np", "1", *roots]) == 0
    assert main(["plan", "-d", "992", "-gpu_memory_target", "0.02", *roots]) == 0
    for configuration in (LOWRES, "3d_fullres"):
        assert (
            main(["preprocess", "-d", "992", "-c", configuration, "-np", "1", "--no-pbar", *roots])
            == 0
        )
    preprocessed = Path(environment["nnUNet_preprocessed"]) / DATASET
    plans = json.loads((preprocessed / "nnUNetPlans.json").read_text())
    assert plans["configurations"][CASCADE]["previous_stage"] == LOWRES
    cases = sorted(p.name.removesuffix("_0000.nii.gz") for p in (raw / "imagesTr").iterdir())
    splits = [
        {"train": cases[2:], "val": cases[:2]},
        {"train": cases[:2], "val": cases[2:]},
    ]
    (preprocessed / "splits_final.json").write_text(json.dumps(splits))
    results = Path(environment["nnUNet_results"])
    for fold in (0, 1):
        run(results, environment, LOWRES, fold)
    return {"env": environment, "results": results, "splits": splits, "root": root}


@pytest.fixture(scope="module")
def straight(env: dict) -> dict:
    """Cascade fold 0 trained without interruption."""
    output = run(env["results"], env["env"], CASCADE, 0)
    return {"output": output, "folder": model_dir(env["results"], CASCADE) / "fold_0"}


def test_cascade_fold_trains_with_one_hot_inputs_and_validates(env: dict, straight: dict) -> None:
    folder = straight["folder"]
    final = ckpt.load_checkpoint(folder / ckpt.FINAL)
    first_conv = next(v for k, v in final["network_weights"].items() if v.ndim == 5)
    dataset = json.loads((Path(env["env"]["nnUNet_raw"]) / DATASET / "dataset.json").read_text())
    foreground = [v for v in dataset["labels"].values() if v != 0]
    assert first_conv.shape[1] == len(dataset["channel_names"]) + len(foreground)
    summary = json.loads((folder / "validation" / "summary.json").read_text())
    validated = {c["prediction_file"].rsplit("/", 1)[-1] for c in summary["metric_per_case"]}
    assert len(validated) == len(env["splits"][0]["val"])
    assert final["init_args"]["configuration"] == CASCADE


def test_deadline_stop_then_continue_equals_the_uninterrupted_run(
    env: dict, straight: dict, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    copy_previous_stage(env["results"], results)
    stopped = run(results, env["env"], CASCADE, 0, stops=True, **STOP_AFTER_FIRST_EPOCH)
    folder = model_dir(results, CASCADE) / "fold_0"
    assert "stopped at epoch 0 by deadline" in stopped
    assert (folder / ckpt.LATEST).is_file() and not (folder / ckpt.FINAL).exists()
    run(results, env["env"], CASCADE, 0, resume=True)
    assert (folder / "validation" / "summary.json").is_file()
    resumed = ckpt.load_checkpoint(folder / ckpt.FINAL)["network_weights"]
    reference = ckpt.load_checkpoint(straight["folder"] / ckpt.FINAL)["network_weights"]
    assert resumed.keys() == reference.keys()
    for key, value in reference.items():
        assert torch.equal(resumed[key], value), key


def test_missing_previous_stage_file_is_one_line_and_writes_nothing(
    env: dict, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    previous = copy_previous_stage(env["results"], results)
    missing = env["splits"][1]["val"][0]  # a training case of cascade fold 0, from lowres fold 1
    (previous / f"{missing}.b2nd").unlink()
    environment = {**env["env"], "nnUNet_results": str(results)}
    schedule = ["--epochs", "1", "--iterations", "1", "--val-iterations", "1", "-device", "cpu"]
    result = cli(environment, "train", "992", CASCADE, "0", "-tr", TRAINER, *schedule)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert missing in lines[0] and "3d_lowres fold 1" in lines[0]
    assert f"nnunet-core train Dataset992_CascTrain 3d_lowres 1 -tr {TRAINER}" in lines[0]
    assert not model_dir(results, CASCADE).exists()


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="no SIGUSR1 on this platform")
def test_usr1_stops_a_cascade_fold_process_and_continue_finishes(env: dict, tmp_path: Path) -> None:
    results = tmp_path / "results"
    copy_previous_stage(env["results"], results)
    environment = {**env["env"], "nnUNet_results": str(results), stop_signal.ENV_VAR: "USR1"}
    schedule = ["--epochs", "4", "--iterations", "2", "--val-iterations", "1"]
    command = ["train", "992", CASCADE, "0", "-tr", TRAINER, "-device", "cpu", "--num-workers"]
    command += ["0", *schedule]
    out = tmp_path / "out.txt"
    with open(out, "w") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "nnunet_core", *command],
            env=environment,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        try:
            end = time.time() + 120
            while not re.search(r": Epoch 1$", out.read_text(), re.MULTILINE):  # 0 finished
                assert process.poll() is None, out.read_text()[-3000:]
                assert time.time() < end, "epoch 1 did not start in 120 s"
                time.sleep(0.02)
            process.send_signal(signal.SIGUSR1)
            status = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    text = out.read_text()
    # a stop is the CLI's own EXIT_STOPPED (75), the status the train rule's retries act on
    assert status == stop_signal.EXIT_STOPPED, text[-3000:]
    stopped = re.search(r"stopped at epoch (\d+) by SIGUSR1", text)
    assert stopped, text[-3000:]
    k = int(stopped.group(1))
    # the epoch running when the signal came (1, or 2 when a loaded machine delayed the signal)
    assert k == max(int(e) for e in re.findall(r": Epoch (\d+)$", text, re.MULTILINE)) < 3
    folder = model_dir(results, CASCADE) / "fold_0"
    assert ckpt.load_checkpoint(folder / ckpt.LATEST)["current_epoch"] == k + 1
    assert not (folder / ckpt.FINAL).exists()
    continued = check(cli(environment, *command, "--c"))
    pattern = rf"continuing from \S*{re.escape(ckpt.LATEST)} at epoch {k + 1}$"
    assert re.search(pattern, continued.stdout, re.MULTILINE), continued.stdout[-3000:]
    assert ckpt.load_checkpoint(folder / ckpt.FINAL)["current_epoch"] == 4
    assert (folder / "validation" / "summary.json").is_file()


def test_cascade_fold_trains_on_two_gloo_ranks_and_validates_every_case(
    env: dict, tmp_path: Path
) -> None:
    """DDP: each rank reads the previous stage for its own samples and validation cases."""
    results = tmp_path / "results"
    copy_previous_stage(env["results"], results)
    environment = {**env["env"], "nnUNet_results": str(results)}
    schedule = ["--epochs", "1", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0"]
    command = ["992", CASCADE, "1", "-tr", TRAINER, "-device", "cpu", "-num_gpus", "2", *schedule]
    result = check(cli(environment, *command, module="nnunet_core.train"))
    folder = model_dir(results, CASCADE) / "fold_1"
    logs = sorted(folder.glob("training_log_*.txt"))
    assert len(logs) == 1, result.stdout[-3000:]
    log = logs[0].read_text()
    assert "DDP rank 0/2" in log and "DDP rank 1/2" in log
    final = ckpt.load_checkpoint(folder / ckpt.FINAL)
    first_conv = next(v for v in final["network_weights"].values() if v.ndim == 5)
    assert first_conv.shape[1] == 3  # one image channel + organ + lesion one-hot
    summary = json.loads((folder / "validation" / "summary.json").read_text())
    validated = {c["prediction_file"].rsplit("/", 1)[-1] for c in summary["metric_per_case"]}
    assert validated == {f"{case}.nii.gz" for case in env["splits"][1]["val"]}
