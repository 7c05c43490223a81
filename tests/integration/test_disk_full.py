"""A full or read-only results disk, with a real small tmpfs as ``nnUNet_results``.

A training whose disk fills up after its first checkpoint stops with one line naming the file it
could not write (exit 4, no traceback), keeps the last good checkpoint byte for byte, leaves no
temporary file; once space is freed, ``--c`` finishes from that checkpoint. The atomic writers
themselves refuse a write that ended on a full disk (ITK truncates a .nii.gz silently there).
A read-only results folder is refused before anything runs, by ``nnunet-core train`` and by the
workflow (at parse time). Needs root (mount); skipped otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from nnunet_core.io.atomic import atomic_path
from nnunet_core.model import checkpoint as ckpt
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli
from tests.helpers.workflow import snakemake, tiny_config

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs mounts")

SCHEDULE = ["--epochs", "4", "--iterations", "6", "--val-iterations", "1", "--save-every", "1"]
TRAIN = ["train", "900", CONFIG, "0", "-device", "cpu", "--num-workers", "0", *SCHEDULE]
LOCK_FILE = ".training.lock"  # the fold lock's file stays until the fold is finished


def mount_tmpfs(folder: Path, size: str) -> Path:
    """A fresh tmpfs of ``size`` at ``folder``; skips the test where mounting is impossible."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the disk-full and read-only cases need one)")
    folder.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    return folder


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB tmpfs: the tiny fold's files fit many times, until the ballast fills it."""
    folder = mount_tmpfs(tmp_path / "disk", "64m")
    yield folder
    unmount(folder)


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    folder = mount_tmpfs(tmp_path / "ro", "1m")
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    yield folder
    unmount(folder)


def fill(folder: Path) -> Path:
    """Write a ballast file until the disk has no block left."""
    ballast = folder / "ballast"
    with open(ballast, "wb", buffering=0) as handle:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    assert os.statvfs(folder).f_bavail == 0
    return ballast


def temporaries(folder: Path) -> list[Path]:
    """Files our atomic writers leave while writing: hidden ``.<target>.<random>...`` names."""
    return [p for p in folder.rglob(".*") if p.is_file() and p.name != LOCK_FILE] + list(
        folder.rglob("*.partial")
    )


@pytest.mark.slow
def test_a_full_results_disk_stops_with_one_line_keeps_the_checkpoint_and_resumes(
    env: dict[str, str], small_disk: Path, tmp_path: Path
) -> None:
    environment = {**env, "nnUNet_results": str(small_disk)}
    fold = small_disk / DATASET / MODEL / "fold_0"
    latest = fold / ckpt.LATEST
    out = tmp_path / "train.txt"  # outside the full disk: the message must reach the user
    with open(out, "w") as handle:
        trainer = subprocess.Popen(
            [sys.executable, "-m", "nnunet_core", *TRAIN],
            env=environment,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        end = time.time() + 300
        while not latest.is_file():  # epoch 0 is saved (renamed into place: complete)
            assert trainer.poll() is None, out.read_text()
            assert time.time() < end, out.read_text()
            time.sleep(0.02)
        trainer.send_signal(signal.SIGSTOP)  # the disk fills while the trainer cannot write
        good = latest.read_bytes()
        ballast = fill(small_disk)
        trainer.send_signal(signal.SIGCONT)
        code = trainer.wait(timeout=300)
    finally:
        if trainer.poll() is None:
            trainer.kill()
            trainer.wait()
    text = out.read_text()
    assert code == 4, text
    errors = [line for line in text.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, text
    assert re.fullmatch(
        rf"nnunet-core train: error: no space left on device writing (in )?{re.escape(str(fold))}"
        r"\S*; free space on that disk, then continue with --c \(from checkpoint_latest\.pth, "
        r"which is intact\)",
        errors[0],
    ), text
    assert "Traceback" not in text and "RuntimeError" not in text, text
    assert latest.read_bytes() == good  # the last good checkpoint, byte for byte
    epoch = ckpt.load_checkpoint(latest)["current_epoch"]
    assert epoch >= 1
    assert not (fold / ckpt.FINAL).exists()
    assert temporaries(small_disk) == []

    ballast.unlink()  # space freed: the same command with --c continues from that epoch
    resumed = check(cli(environment, *TRAIN, "--c"))
    assert (fold / ckpt.FINAL).is_file()
    assert (fold / "validation" / "summary.json").is_file()
    assert f"continuing from {latest} at epoch {epoch}" in resumed.stdout, resumed.stdout[-3000:]
    assert torch.load(fold / ckpt.FINAL, weights_only=True)["current_epoch"] == 4
    attempts = json.loads((fold / "provenance.json").read_text())["attempts"]
    assert (attempts[-1]["start_epoch"], attempts[-1]["status"]) == (epoch, "finished")
    assert temporaries(small_disk) == []


def test_an_atomic_write_that_ends_on_a_full_disk_is_refused_and_leaves_the_old_file(
    small_disk: Path,
) -> None:
    import SimpleITK as sitk

    target = small_disk / "case.nii.gz"
    target.write_bytes(b"old")
    checkpoint = ckpt.save_checkpoint(
        {"network_weights": {}, "w": torch.zeros(4)}, small_disk / "c.pth"
    )
    old_checkpoint = checkpoint.read_bytes()
    fill(small_disk)
    image = sitk.GetImageFromArray(np.random.default_rng(0).random((40, 64, 64), np.float32))
    with pytest.raises(OSError) as caught:
        with atomic_path(target, suffix=".nii.gz") as tmp:
            sitk.WriteImage(image, str(tmp))  # ITK prints "wrote only 0 of ..." and returns
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(target))
    assert target.read_bytes() == b"old"
    with pytest.raises(OSError) as caught:
        ckpt.save_checkpoint({"network_weights": {}, "w": torch.ones(1 << 20)}, checkpoint)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(checkpoint))
    assert checkpoint.read_bytes() == old_checkpoint
    assert temporaries(small_disk) == []


@pytest.mark.slow
def test_train_refuses_a_read_only_results_folder_before_anything_runs(
    env: dict[str, str], read_only_disk: Path
) -> None:
    preprocessed = Path(env["nnUNet_preprocessed"])
    before = sorted((p, p.stat().st_mtime_ns) for p in preprocessed.rglob("*"))
    result = cli({**env, "nnUNet_results": str(read_only_disk)}, *TRAIN)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        f"nnunet-core train: error: nnUNet_results={read_only_disk}: read-only file system; "
        "train writes the fold's checkpoints, log and validation there"
    ]
    assert result.stdout == ""
    assert sorted((p, p.stat().st_mtime_ns) for p in preprocessed.rglob("*")) == before
    nested = cli(env, *TRAIN, "--results", str(read_only_disk / "new"))
    assert nested.returncode == 2
    assert nested.stderr.splitlines() == [
        f"nnunet-core train: error: --results {read_only_disk / 'new'}: read-only file system "
        f"(it would be created in {read_only_disk}); train writes the fold's checkpoints, log "
        "and validation there"
    ]


@pytest.mark.slow
def test_the_workflow_refuses_a_read_only_results_folder_at_parse_time(tmp_path: Path) -> None:
    work = tmp_path / "work"
    results = mount_tmpfs(work / "results", "1m")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(results)], check=True)
        run = tmp_path / "run"
        run.mkdir()
        result = snakemake(run, tiny_config(work), "-n", check=False)
    finally:
        unmount(results)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert (
        f"config work_dir: {results} is not writable (read-only file system); the workflow "
        "writes its results there: make it writable or choose another work_dir"
    ) in output.splitlines(), output
    assert "Traceback" not in output, output
    assert sorted(p.name for p in work.iterdir()) == ["results"]
