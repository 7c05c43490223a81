"""What a person reads in the log files of a real tiny pipeline (no terminal, as under Snakemake).

Every command runs as a subprocess with stdout and stderr into one log file (``> {log} 2>&1``):
preprocessing and prediction log ``case i/N`` lines and no bar, a fresh fold with ``--c`` says
once that it starts fresh (no ``UserWarning``), each epoch logs ``epoch i/N`` with an ETA, and a
resumed fold counts on from where it stopped.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from tests.helpers.training import roots_env

pytestmark = pytest.mark.slow

DATASET = "Dataset900_Synth"
SCHEDULE = ["--iterations", "2", "--val-iterations", "1", "--num-workers", "0", "-device", "cpu"]
WARNING_SOURCE = re.compile(r"^\S+\.py:\d+: \w*Warning", re.MULTILINE)


def run_into_log(env: dict[str, str], log: Path, *args: str) -> str:
    """``nnunet-core ARGS >> log 2>&1``; returns what this command appended."""
    before = log.stat().st_size if log.exists() else 0
    with open(log, "a") as out:
        done = subprocess.run(
            [sys.executable, "-m", "nnunet_core", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
        )
    text = log.read_bytes()[before:].decode()
    assert done.returncode == 0, text
    return text


def stop_during_second_epoch(env: dict[str, str], log: Path, *args: str) -> None:
    """``nnunet-core ARGS >> log 2>&1``, sent the stop signal (SIGUSR1) once its second epoch
    began: it stops after that epoch with checkpoint_latest (exit 75)."""
    with open(log, "a") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "nnunet_core", *args], env=env, stdout=out, stderr=out
        )
    deadline = time.time() + 300
    while ": Epoch 1\n" not in (log.read_text() if log.exists() else ""):
        assert process.poll() is None and time.time() < deadline, log.read_text()
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGUSR1)
    assert process.wait(timeout=300) == EXIT_STOPPED, log.read_text()


def case_numbers(text: str, label: str) -> list[int]:
    return [int(n) for n in re.findall(rf"^{re.escape(label)}: case (\d+)/\d+ ", text, re.M)]


def assert_plain(text: str) -> None:
    """No bar redraws, no Python warnings with their source lines."""
    assert "\r" not in text
    assert "UserWarning" not in text and not WARNING_SOURCE.search(text)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict:
    root = tmp_path_factory.mktemp("progress_logs")
    make_raw_dataset(root / "raw" / DATASET, num_training=5, num_test=2)
    env = roots_env(root)
    logs = root / "logs"
    logs.mkdir()
    texts = {
        "fingerprint": run_into_log(
            env, logs / "fingerprint.log", "fingerprint", "-d", "900", "-np", "2"
        ),
    }
    run_into_log(env, logs / "plan.log", "plan", "-d", "900")
    run_into_log(env, logs / "splits.log", "splits", "-d", "900")
    preprocess = ["preprocess", "-d", "900", "-c", "3d_fullres", "-np", "2"]
    texts["preprocess"] = run_into_log(env, logs / "preprocess.log", *preprocess)
    train = ["train", "900", "3d_fullres", "0", "--c", *SCHEDULE]
    texts["fresh"] = run_into_log(env, logs / "train.log", *train, "--epochs", "2")
    # fold 1 stopped by the stop signal during its second epoch, then continued (a changed
    # --epochs would start a fold over: the schedule invalidates it)
    stopped = ["train", "900", "3d_fullres", "1", "--c", *SCHEDULE, "--epochs", "3"]
    stop_during_second_epoch(env, logs / "stopped.log", *stopped, "--save-every", "1")
    texts["resumed"] = run_into_log(env, logs / "stopped.log", *stopped, "--save-every", "1")
    images = str(root / "raw" / DATASET / "imagesTs")
    predict = ["predict", "-i", images, "-o", str(root / "pred"), "-d", "900", "-c", "3d_fullres"]
    texts["predict"] = run_into_log(
        env, logs / "predict.log", *predict, "-f", "0", "-device", "cpu"
    )
    return texts


def test_preprocessing_logs_case_i_of_n_and_no_bar(pipeline: dict) -> None:
    for name, label in (
        ("fingerprint", "fingerprint"),
        ("preprocess", "preprocess nnUNetPlans_3d_fullres"),
    ):
        text = pipeline[name]
        assert_plain(text)
        assert case_numbers(text, label) == [1, 2, 3, 4, 5], text
        assert re.search(rf"^{label}: case 5/5 \(synth_\d+\) \d+\.\d s; 5 cases in ", text, re.M)


def test_a_fresh_fold_says_so_once_without_a_warning(pipeline: dict) -> None:
    text = pipeline["fresh"]
    assert_plain(text)
    fresh = re.findall(r"no checkpoint in \S+fold_0 to continue from; starting fresh", text)
    assert len(fresh) == 1
    assert "starting fresh" in text.splitlines()[0]  # the log opens with it, nothing before


def test_each_epoch_logs_i_of_n_with_an_eta(pipeline: dict) -> None:
    text = pipeline["fresh"]
    assert re.findall(r": Epoch (\d+)$", text, re.M) == ["0", "1"]  # upstream's lines stay
    assert len(re.findall(r": Epoch time: \d+\.\d\d s$", text, re.M)) == 2
    assert re.search(
        r": epoch 1/2: \d+\.\d\d s; ETA \d+:\d\d:\d\d \(about [\d-]+ [\d:]+\)$", text, re.M
    )
    assert re.search(r": epoch 2/2: \d+\.\d\d s; all epochs done$", text, re.M)


def test_a_resumed_fold_counts_on(pipeline: dict) -> None:
    text = pipeline["resumed"]
    assert_plain(text)
    assert "continuing from" in text and "starting fresh" not in text
    assert re.findall(r": epoch (\d+)/3", text) == ["3"]


def test_prediction_logs_case_i_of_n_and_no_bar(pipeline: dict) -> None:
    text = pipeline["predict"]
    assert_plain(text)
    assert case_numbers(text, "predict") == [1, 2], text
    assert re.search(r"^predict: case 1/2 \(synth_t\d+\) \d+\.\d s; ETA ", text, re.M)


def test_the_final_validation_logs_case_i_of_n(pipeline: dict) -> None:
    found = re.findall(r": validation: case (\d+)/(\d+) \(synth_\d+\) \d+\.\d s", pipeline["fresh"])
    assert found and [int(i) for i, _ in found] == list(range(1, int(found[0][1]) + 1))
