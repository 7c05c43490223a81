"""Two real Snakemake workflows at once (issue 14 item 6).

On one work_dir: a second run from the same ``--directory`` gets Snakemake's own "Directory
cannot be locked"; a second run from another ``--directory`` (Snakemake locks only its own
folder, and an absolute work_dir is the same from anywhere) gets our work_dir lock
(nnunet_core.workflow.work_lock) before any of its jobs. Neither disturbs the first, which finishes
with
one training attempt.

On two work_dirs sharing ``training.gpu_lock_dir``: the fold jobs of both take GPU slots from the
same flock'ed files and never hold one at the same time. There is no GPU here: CUDA is mocked by
faking the slot count (``nnUNet_num_gpus=1``, as tests/unit/cluster/test_gpu_slots.py does with
competing processes); ``device: auto`` still finds no CUDA, so the folds train on the CPU while
each holds its slot for its whole run.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from nnunet_core.layout.work import WORK_LOCK_NAME
from nnunet_core.workflow import work_lock
from tests.helpers.workflow import DATASET, REPO, copy_prepared, prepared_config, snakemake

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock and /proc")

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): ", re.MULTILINE)


def one_fold_config(work: Path, **training) -> dict:
    """One fold of the prepared work_dir's config (``copy_prepared`` it to ``work`` first)."""
    config = prepared_config(work)
    config["training"].update(
        folds=[0], epochs=2, iterations_per_epoch=4, val_iterations_per_epoch=1, retries=0
    )
    config["training"].update(training)
    return config


def start(directory: Path, config: dict, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """``snakemake trained`` in the background, its output in ``directory/snakemake.txt``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(config))
    out = directory / "snakemake.txt"
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        *("--snakefile", str(REPO / "Snakefile"), "--directory", str(directory)),
        *("--configfile", str(directory / "config.yaml"), "--cores", "2", "trained"),
    ]
    with open(out, "w") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, cwd=directory, env=env
        )
    return process, out


def train_log(work: Path) -> Path:
    return work / "logs" / DATASET / "train_3d_fullres_fold0.log"


def wait_for(condition, process: subprocess.Popen, out: Path, timeout: float = 400) -> None:
    end = time.time() + timeout
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"workflow ended early ({process.returncode}):\n{out.read_text()[-4000:]}")
        if time.time() > end:
            pytest.fail(f"timed out:\n{out.read_text()[-4000:]}")
        time.sleep(0.1)


def trainer_pid(root: int) -> int | None:
    """The ``nnunet-core train`` process below the process ``root``."""
    parents, argvs = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argvs[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    for pid, argv in argvs.items():
        if b"train" in argv and any(b"nnunet-core" in a for a in argv[:2]):
            ancestor = pid
            while ancestor > 1 and ancestor != root:
                ancestor = parents.get(ancestor, 1)
            if ancestor == root:
                return pid
    return None


def finish(process: subprocess.Popen, out: Path) -> str:
    try:
        code = process.wait(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = out.read_text()
    assert code == 0, text[-4000:]
    return text


def attempts(work: Path) -> list[tuple[int, str]]:
    record = json.loads(
        (work / "results" / DATASET / MODEL / "fold_0" / "provenance.json").read_text()
    )
    return [(a["start_epoch"], a["status"]) for a in record["attempts"]]


def test_the_work_dir_lock_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from nnunet_core.workflow.work_lock import acquire; acquire(sys.argv[1]); "
            "print('held', flush=True); sys.stdin.read()",
            str(tmp_path / "work"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(work_lock.WorkDirLockedError, match=rf"\(pid {holder.pid} on "):
            work_lock.acquire(tmp_path / "work")
        holder.send_signal(signal.SIGKILL)  # the kernel drops the lock: never stale
        holder.wait(10)
        lock = work_lock.acquire(tmp_path / "work")
        assert lock == tmp_path / "work" / "logs" / WORK_LOCK_NAME
        assert work_lock.acquire(tmp_path / "work") == lock  # again in this process: a no-op
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(10)


@pytest.mark.slow
def test_a_second_workflow_on_the_same_work_dir_is_refused_and_the_first_finishes(
    tmp_path: Path, prepared_work: Path
) -> None:
    work = copy_prepared(prepared_work, tmp_path / "work")  # absolute: the same from anywhere
    config = one_fold_config(work)
    first, first_out = start(tmp_path / "first", config)
    trainer = None
    try:
        wait_for(
            lambda: train_log(work).is_file() and ": Epoch 0" in train_log(work).read_text(),
            first,
            first_out,
        )
        trainer = trainer_pid(first.pid)
        assert trainer is not None
        os.kill(trainer, signal.SIGSTOP)  # the fold stays "running" while the others try

        same = snakemake(tmp_path / "first", config, "trained", check=False)
        same_text = same.stdout + same.stderr
        assert same.returncode != 0, same_text
        assert "Error: Directory cannot be locked." in same_text, same_text
        assert str(tmp_path / "first") in same_text  # Snakemake names the folder it locks

        (tmp_path / "second").mkdir()
        other = snakemake(tmp_path / "second", config, "trained", check=False)
        other_text = other.stdout + other.stderr
        assert other.returncode != 0, other_text
        expected = (
            re.escape(f"work_dir {work} is in use by another workflow (pid {first.pid} on ")
            + r"\S+"
            + re.escape(
                f", run from {tmp_path / 'first'}; lock logs/{WORK_LOCK_NAME}): wait for it "
                "to finish or stop it, or choose another work_dir"
            )
        )
        assert any(re.fullmatch(expected, line) for line in other_text.splitlines()), other_text
        assert "Traceback" not in other_text
        for text in (same_text, other_text):  # refused before any job of theirs started
            assert not re.search(r"^(local)?rule \w+:$", text, re.MULTILINE), text
    finally:
        if trainer is not None:
            os.kill(trainer, signal.SIGCONT)
    finish(first, first_out)
    assert attempts(work) == [(0, "finished")]
    assert (work / "results" / DATASET / MODEL / "fold_0" / "checkpoint_final.pth").is_file()


def held_interval(log: Path) -> tuple[datetime, datetime]:
    """First and last timestamp of the trainer's lines: inside the time it held its slot."""
    stamps = [datetime.fromisoformat(s) for s in STAMP.findall(log.read_text())]
    assert stamps, log.read_text()
    return stamps[0], stamps[-1]


@pytest.mark.slow
def test_two_workflows_sharing_the_gpu_slot_folder_never_share_a_slot(
    tmp_path: Path, prepared_work: Path
) -> None:
    slots = tmp_path / "gpu_locks"
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["nnUNet_num_gpus"] = "1"  # CUDA mocked: one fake GPU slot (no GPU on this machine)
    # The test holds the only slot first, so that both folds are waiting when it is freed.
    blocker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys; from nnunet_core.cluster.gpu_slots import acquire_gpus; "
            "acquire_gpus(1, sys.argv[1]); print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True); "
            "sys.stdin.read()",
            str(slots),
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    runs = []
    try:
        assert blocker.stdout.readline().strip() == "0"
        for name in ("a", "b"):
            work = copy_prepared(prepared_work, tmp_path / name / "work")
            config = one_fold_config(work, device="auto", gpu_lock_dir=str(slots))
            runs.append((work, *start(tmp_path / name, config, env)))
        for work, process, out in runs:
            wait_for(
                lambda work=work: (
                    train_log(work).is_file()
                    and "waiting for 1 free GPU slot(s) of 1" in train_log(work).read_text()
                ),
                process,
                out,
            )
        blocker.stdin.close()  # the slot is free: one fold takes it, the other waits for it
        blocker.wait(10)
        for _, process, out in runs:
            finish(process, out)
    finally:
        if blocker.poll() is None:
            blocker.kill()
        for _, process, _ in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
    intervals = []
    for work, _, _ in runs:
        text = train_log(work).read_text()
        assert f"using GPU slot(s) 0 (locks in {slots})" in text, text
        assert attempts(work) == [(0, "finished")]
        intervals.append(held_interval(train_log(work)))
    (start_1, end_1), (start_2, end_2) = sorted(intervals)
    assert end_1 <= start_2, intervals  # one after the other, never both on slot 0
