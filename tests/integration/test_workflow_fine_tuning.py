"""Fine-tuning through real Snakemake (``training.pretrained_weights``).

A tiny model is trained by the workflow on a dataset of 2 labels (Dataset901_Two: the synthetic data
with its lesion merged into the organ); then the workflow trains another dataset of 3 labels
(Dataset900_Synth, a copy of the shared prepared work_dir: the same synthetic images, hence the same
plans architecture) from that model folder's fold 0. Each fold's first attempt loads every tensor
but the segmentation heads and logs what it skipped; provenance names the file and its sha256.
SIGUSR1 to fold 0's training, its rule's shell and Snakemake itself (as SLURM signals every process
of a job step) stops the training at the epoch's end: ``nnunet-core train`` exits EXIT_STOPPED with
its line in the fold's log, the rule fails, the shell and Snakemake survive (the workflow ignores
SIGUSR1), ``retries:`` continues from the fold's checkpoint_latest, not from the pretrained file,
the workflow finishes and fold 1 is untouched (the workflow's stop and retry, tested here once;
through SLURM: tests/cluster/test_slurm_signals.py). The same model exported to a zip is extracted
by its own job into work_dir/pretrained, and a DDP fold job gets the same flags. Bad values stop the
workflow before any job with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk
import yaml

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.io.atomic import read_json, write_json
from tests.helpers.workflow import (
    REPO,
    copy_prepared,
    logged_shell_commands,
    prepared_config,
    snakemake,
    tiny_config,
    trainer_of_fold,
)

SOURCE, TARGET = "Dataset901_Two", "Dataset900_Synth"  # the target: prepared_work's dataset
MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
UPSTREAM_ZIP = REPO / "tests" / "data" / "upstream_model" / "upstream_model.zip"
LOADED = "loaded pretrained weights from {}; not loaded (upstream's rule: the segmentation heads "
LOADED += "start fresh): decoder.heads.0.weight, decoder.heads.0.bias, "


def two_label_dataset(make_raw_dataset, raw_root: Path) -> None:
    """The tiny demo data (6 + 2 cases of 12 x 32 x 32) with lesion (2) merged into organ (1)."""
    folder = make_raw_dataset(raw_root / SOURCE, num_training=6, num_test=2, shape=(12, 32, 32))
    for labels in (*folder.glob("labelsTr/*.nii.gz"), *folder.glob("labelsTs/*.nii.gz")):
        image = sitk.ReadImage(str(labels))
        merged = sitk.GetImageFromArray(np.minimum(sitk.GetArrayFromImage(image), 1))
        merged.CopyInformation(image)
        sitk.WriteImage(merged, str(labels))
    dataset_json = read_json(folder / "dataset.json")
    dataset_json["labels"] = {"background": 0, "organ": 1}
    write_json(folder / "dataset.json", dataset_json)


def small_schedule(config: dict, **training) -> dict:
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(val_iterations_per_epoch=1, **training)
    return config


def fold_logs(fold_folder: Path) -> str:
    """The fold's training logs, one per attempt, oldest first (Snakemake replaces the rule's
    log at a retry; these stay)."""
    return "".join(p.read_text() for p in sorted(fold_folder.glob("training_log_*.txt")))


def attempts(fold_folder: Path) -> list[dict]:
    return json.loads((fold_folder / "provenance.json").read_text())["attempts"]


@pytest.fixture(scope="module")
def source_model(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> Path:
    """Dataset901_Two trained by the workflow: 3d_fullres fold 0, 1 epoch of 2 iterations."""
    root = tmp_path_factory.mktemp("source")
    two_label_dataset(make_raw_dataset, root / "raw")
    config = tiny_config(
        root / "work", id=901, name="Two", raw_root=str(root / "raw"), synthetic={"enabled": False}
    )
    small_schedule(config, folds=[0], epochs=1, iterations_per_epoch=2, retries=0)
    snakemake(root, config, "trained")
    model = root / "work" / "results" / SOURCE / MODEL
    assert (model / "fold_0" / "checkpoint_final.pth").is_file()
    return model


@pytest.fixture(scope="module")
def fine_tuned(
    tmp_path_factory: pytest.TempPathFactory, source_model: Path, prepared_work: Path
) -> dict:
    """Dataset900_Synth (3 labels; a copy of the shared prepared work_dir, so the run starts at
    training), folds 0 and 1 from the source model's fold 0; SIGUSR1 stops fold 0 at epoch 1,
    its retry finishes it."""
    root = tmp_path_factory.mktemp("target")
    config = prepared_config(copy_prepared(prepared_work, root / "work"))
    small_schedule(config, folds=[0, 1], epochs=3, iterations_per_epoch=6, retries=1)
    config["training"]["pretrained_weights"] = {"model": str(source_model), "fold": 0}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        *("--snakefile", str(REPO / "Snakefile"), "--directory", str(root)),
        *("--configfile", str(root / "config.yaml"), "--cores", "2", "-p", "trained"),
    ]
    out = root / "snakemake.txt"
    with open(out, "w") as handle:
        run = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=root)
    log = root / "work" / "logs" / TARGET / "train_3d_fullres_fold0.log"
    try:
        end, trainer = time.time() + 300, None
        while time.time() < end and run.poll() is None:
            if log.is_file() and ": Epoch 1" in log.read_text():
                trainer = trainer_of_fold(TARGET, "0", run.pid)
                if trainer is not None:
                    break
            time.sleep(0.05)
        assert trainer is not None, f"fold 0 never reached epoch 1:\n{out.read_text()[-3000:]}"
        shell = subprocess.run(["ps", "-o", "ppid=", "-p", str(trainer)], capture_output=True)
        for pid in (trainer, int(shell.stdout), run.pid):  # as SLURM signals the job step
            os.kill(pid, signal.SIGUSR1)
        assert run.wait(timeout=400) == 0, out.read_text()[-4000:]
    finally:
        if run.poll() is None:  # a failed wait: Snakemake ends its jobs on SIGTERM
            run.terminate()
            run.wait(timeout=120)
    return {
        "root": root,
        "config": config,
        "output": "\n".join([out.read_text(), *logged_shell_commands(out.read_text())]),
        "model": root / "work" / "results" / TARGET / MODEL,
        "logs": root / "work" / "logs" / TARGET,
        "pretrained": source_model / "fold_0" / "checkpoint_final.pth",
    }


@pytest.mark.slow
def test_every_fold_starts_from_the_pretrained_fold_and_logs_what_it_skipped(fine_tuned) -> None:
    pretrained = fine_tuned["pretrained"]
    commands = [line for line in fine_tuned["output"].splitlines() if "nnunet-core train " in line]
    assert {c.split(" 3d_fullres ")[1].split()[0] for c in commands} == {"0", "1"}, commands
    assert all(f"--c -pretrained_weights {pretrained} --raw" in line for line in commands)
    for fold in ("0", "1"):
        log = fold_logs(fine_tuned["model"] / f"fold_{fold}")
        assert log.count(LOADED.format(pretrained)) == 1, log  # the first attempt only
        first = attempts(fine_tuned["model"] / f"fold_{fold}")[0]
        assert first["start_epoch"] == 0
        start = first["start_weights"]
        assert (start["from"], start["path"]) == ("pretrained", str(pretrained.resolve()))
        assert start["sha256"] == hashlib.sha256(pretrained.read_bytes()).hexdigest()
        assert start["not_loaded"] and all(".heads." in key for key in start["not_loaded"])


@pytest.mark.slow
def test_the_heads_follow_the_new_labels(fine_tuned) -> None:
    import torch

    def head_channels(checkpoint: Path) -> int:
        weights = torch.load(checkpoint, weights_only=True)["network_weights"]
        return int(weights["decoder.seg_layers.0.weight"].shape[0])

    assert head_channels(fine_tuned["pretrained"]) == 2  # background, organ
    assert head_channels(fine_tuned["model"] / "fold_1" / "checkpoint_final.pth") == 3


@pytest.mark.slow
def test_the_stopped_fold_retries_from_its_own_checkpoint(fine_tuned) -> None:
    fold_0 = fine_tuned["model"] / "fold_0"
    retried = "retry: attempt 2 of 2: stopped before the walltime or its deadline; continuing"
    assert retried in (fine_tuned["logs"] / "train_3d_fullres_fold0.log").read_text()
    assert (
        f"{TARGET} 3d_fullres fold 0: stopped at epoch 1 by SIGUSR1; checkpoint_latest.pth "
        f"holds epoch 2; exit {EXIT_STOPPED}: the retry continues with --c"
    ) in fold_logs(fold_0)
    assert len(list(fold_0.glob("training_log_*.txt"))) == 2  # one per attempt
    log = (fine_tuned["logs"] / "train_3d_fullres_fold0.log").read_text()  # the retry's
    assert f"continuing from {fold_0 / 'checkpoint_latest.pth'} at epoch 2" in log
    pretrained = fine_tuned["pretrained"]
    assert (
        "the fold has its own checkpoint (checkpoint_latest.pth): "
        f"-pretrained_weights {pretrained} not loaded"
    ) in log
    record = attempts(fold_0)
    assert [(a["start_epoch"], a["status"]) for a in record] == [(0, "stopped"), (2, "finished")]
    assert record[1]["start_weights"] == {
        "from": "checkpoint",
        "path": str((fold_0 / "checkpoint_latest.pth").resolve()),
        "epoch": 2,
    }
    other = attempts(fine_tuned["model"] / "fold_1")
    assert [(a["start_epoch"], a["status"]) for a in other] == [(0, "finished")]
    for fold in ("fold_0", "fold_1"):
        assert (fine_tuned["model"] / fold / "checkpoint_final.pth").is_file()
        assert (fine_tuned["model"] / fold / "validation" / "summary.json").is_file()


@pytest.mark.slow
def test_a_model_zip_is_extracted_by_its_own_job_and_ddp_jobs_get_the_flags(
    fine_tuned, source_model: Path
) -> None:
    root, config = fine_tuned["root"], fine_tuned["config"]
    archive = root / "source.zip"
    results = source_model.parent.parent
    export = [sys.executable, "-m", "nnunet_core", "export-model-to-zip", "-d", SOURCE]
    export += ["-o", str(archive), "-c", "3d_fullres", "-f", "0", "--results", str(results)]
    subprocess.run(export, check=True, capture_output=True)
    config["training"]["pretrained_weights"] = {"model": str(archive), "fold": 0}
    config["training"]["gpus_per_job"] = 2
    member = f"{SOURCE}/{MODEL}/fold_0/checkpoint_final.pth"
    extracted = root / "work" / "pretrained" / member
    preview = snakemake(root, config, "trained", "-n", "-p", "--resources", "gpu=4", "-R", "train")
    text = preview.stdout + preview.stderr
    assert "rule extract_pretrained_weights:" in text, text
    commands = [line for line in text.splitlines() if "nnunet-core train " in line]
    assert len(commands) == 2, text
    for line in commands:
        assert f"nnunet-core train -num_gpus 2 {TARGET} 3d_fullres " in line, line
        assert f"--c -pretrained_weights {extracted} --raw" in line, line
    snakemake(root, config, str(extracted))  # the extraction job alone, for real
    assert extracted.read_bytes() == fine_tuned["pretrained"].read_bytes()
    assert sorted(p.name for p in extracted.parent.iterdir()) == ["checkpoint_final.pth"]
    assert "extracted " in (fine_tuned["logs"] / "extract_pretrained_weights.log").read_text()


def _one_clear_line(result, message: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "ConfigurationError" not in output, output
    assert message in output.splitlines(), output
    assert "Traceback" not in output and "InputFunctionException" not in output, output


def test_a_missing_checkpoint_file_stops_the_workflow_before_any_job(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["training"]["pretrained_weights"] = str(tmp_path / "models" / "checkpoint_final.pth")
    result = snakemake(tmp_path, config, "-n", check=False)
    _one_clear_line(
        result,
        f"config training.pretrained_weights: {tmp_path}/models/checkpoint_final.pth "
        "does not exist",
    )
    assert not (tmp_path / "work").exists()


def test_a_model_folder_without_the_fold_stops_the_workflow_before_any_job(
    tmp_path: Path,
) -> None:
    model = tmp_path / "results" / "Dataset004_X" / MODEL
    (model / "fold_0").mkdir(parents=True)
    (model / "fold_0" / "checkpoint_final.pth").write_bytes(b"weights")
    config = tiny_config(tmp_path / "work")
    config["training"]["pretrained_weights"] = {"model": str(model), "fold": 3}
    result = snakemake(tmp_path, config, "-n", check=False)
    _one_clear_line(
        result,
        f"config training.pretrained_weights.fold: {model} has no fold_3 (its folds: fold_0; "
        "model is a Trainer__Plans__Configuration folder)",
    )
    assert not (tmp_path / "work").exists()


def test_a_zip_without_the_member_stops_the_workflow_before_any_job(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["training"]["pretrained_weights"] = {"model": str(UPSTREAM_ZIP), "fold": 2}
    result = snakemake(tmp_path, config, "-n", check=False)
    member = "Dataset950_UpstreamTiny/nnUNetTrainer_UpstreamTiny__nnUNetPlans__3d_fullres/fold_0"
    _one_clear_line(
        result,
        f"config training.pretrained_weights: {UPSTREAM_ZIP} has no member "
        f"*/*/fold_2/checkpoint_final.pth (its checkpoints: {member}/checkpoint_final.pth)",
    )
    assert not (tmp_path / "work").exists()
