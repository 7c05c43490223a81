"""Segmenting new scans (config ``predict:``) through the real SLURM chain.

One ``snakemake --profile`` run (profiles/slurm adapted to the test cluster) segments 5 scans in
shards of 2 with a model made without training (tests/helpers/model_folder.py: random weights,
3d_tiny). ``predict.device`` stays ``auto``: the workflow then gives each shard the ``gpu``
resource on a cluster (workflow/rules/segment.smk), so its sbatch asks for one GPU, and inside
the job torch finds no CUDA (the test cluster's GPUs are fake gres) and predicts on the CPU.

While it runs, the shard of the first two scans is killed half-way: its python process gets
SIGKILL after the first case's record is written and before the second's. The second scan is
larger than the others (in-plane, at a finer spacing, so that the network still sees a small
image) so that writing it takes a while, and the process is advanced in short bursts
(SIGSTOP/SIGCONT) while it is watched, so that the moment is caught on a busy machine too. The
profile's ``retries`` resubmit the failed job as a new SLURM job, which must predict the second
case alone and leave the first one's files untouched (the network output the killed attempt had
staged for it is reused: the job finishes that case from there).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from nnunet_core.layout.new_scans import (
    NEW_SCANS_FOLDER,
    RUNS_FOLDER,
    case_record_path,
    new_scans_dir,
)
from nnunet_core.layout.work import PREDICT_LOG, logs_dir
from nnunet_core.new_scans.plan import shard_cases
from nnunet_core.workflow.log_rotation import earlier_attempts
from tests.helpers.model_folder import DATASET, make_model

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

WORK = "work"
CASES_PER_JOB = 2
# The second scan of the killed shard: 12 x 512 x 512 voxels at 0.1 mm in-plane, which the tiny
# model sees as 12 x 66 x 66 (its spacing is 0.78 mm); writing and reading back its segmentation
# and its overlay take a few hundred ms, the tiny scans' some ms.
LARGE = {"shape": (12, 512, 512), "spacing": (2.5, 0.1, 0.1)}
RUN_TIMEOUT = 300  # seconds (50-85 s measured on a 2-core machine, idle or loaded)
BURST = 0.01  # seconds the watched shard runs between two looks
SHARD_RULE = "predict_shard"


@dataclass
class Run:
    workdir: Path
    output: Path  # predict.output
    returncode: int
    log: str  # the main Snakemake's stdout and stderr
    cases: list[str]
    killed_shard: str
    killed_job: str
    # mtime_ns of the first case's segmentation and record when its shard was killed
    first_times: tuple[int, int]


def _scans(make_raw_dataset, folder: Path) -> Path:
    """5 tiny scans, the second replaced by a large one (the raw datasets' test images)."""
    small = make_raw_dataset(folder / "small" / DATASET, num_training=1, num_test=5)
    large = make_raw_dataset(folder / "large" / DATASET, num_training=1, num_test=1, **LARGE)
    scans = folder / "scans"
    shutil.copytree(small / "imagesTs", scans)
    second = sorted(scans.iterdir())[1]
    shutil.copyfile(next((large / "imagesTs").iterdir()), second)
    return scans


def _shard_pid(shard: str) -> int | None:
    """The shard's own python process (``python -m nnunet_core.new_scans.shard RUN SHARD``, not
    its worker processes), found in /proc: the single-node test cluster runs its jobs here."""
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"nnunet_core.new_scans.shard" in args and shard.encode() in args:
            found[int(entry.name)] = parent
    roots = [pid for pid, parent in found.items() if parent not in found]
    return roots[0] if len(roots) == 1 else None


def _stop(pid: int) -> None:
    """SIGSTOP, and wait until the process is stopped indeed."""
    os.kill(pid, signal.SIGSTOP)
    for _ in range(2000):
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
        if state in "tT":
            return
        time.sleep(0.001)
    pytest.fail(f"shard process {pid} did not stop")


def _kill_half_way(pid: int, first: Path, second: Path) -> None:
    """Let the shard run in bursts; SIGKILL it, stopped, once ``first`` exists and ``second``
    not yet (each case's record, written after its segmentation and overlay)."""
    try:
        while True:
            _stop(pid)
            if second.exists():
                pytest.fail(f"{second.name}'s record came before the shard could be killed")
            if first.exists():
                os.kill(pid, signal.SIGKILL)
                return
            os.kill(pid, signal.SIGCONT)
            time.sleep(BURST)
    except (ProcessLookupError, FileNotFoundError):
        pytest.fail(f"the shard process {pid} ended before its first case was recorded")
    finally:
        with contextlib.suppress(ProcessLookupError):  # a failed test leaves none stopped
            os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def run(cluster, make_raw_dataset, tmp_path_factory) -> Run:
    folder = tmp_path_factory.mktemp("new_scans")
    scans = _scans(make_raw_dataset, folder)
    cases = sorted(p.name.removesuffix("_0000.nii.gz") for p in scans.iterdir())
    small = folder / "small" / DATASET
    dataset_json = json.loads((small / "dataset.json").read_text())
    model = make_model(folder / "results", dataset_json, "3d_tiny", [0])
    output = folder / "segmentations"
    config = {
        "work_dir": WORK,
        "predict": {
            "model": str(model),
            "input": str(scans),
            "output": str(output),
            "cases_per_job": CASES_PER_JOB,
            "use_mirroring": False,  # 8 times fewer network passes: the jobs are tested here
        },
    }
    workdir = folder / "run"
    workdir.mkdir()
    profile = cluster.profile(folder)
    snakemake = cluster.start(workdir, config, "--profile", str(profile), timeout=RUN_TIMEOUT)
    first, second = (case_record_path(output, c) for c in cases[:2])
    try:

        def watched_shard() -> tuple[str, str, int] | None:
            runs = list((new_scans_dir(workdir / WORK) / RUNS_FOLDER).glob("*"))
            for job in cluster.jobs(workdir):
                shard = job.comment.removeprefix(f"rule_{SHARD_RULE}_wildcards_")
                if job.state != "RUNNING" or shard == job.comment or len(runs) != 1:
                    continue
                if shard_cases(runs[0], shard) == cases[:2]:
                    pid = _shard_pid(shard)
                    return (shard, job.id, pid) if pid else None
            return None

        shard, job_id, pid = cluster.wait_for(
            watched_shard,
            180,
            "the shard of the first two scans to run",
            interval=0.05,
            alive=snakemake.alive,
            details=lambda: f"squeue:\n{cluster.table(workdir)}\nsnakemake:\n{snakemake.tail()}",
        )
        _kill_half_way(pid, first, second)
        segmentation = output / f"{cases[0]}{dataset_json['file_ending']}"
        first_times = (segmentation.stat().st_mtime_ns, first.stat().st_mtime_ns)
        returncode = snakemake.wait()
        print(f"{workdir}: {snakemake.seconds:.0f} s; jobs:\n{cluster.table(workdir)}")
    finally:
        snakemake.stop()
        cluster.cancel_leftovers(workdir)
    return Run(workdir, output, returncode, snakemake.output, cases, shard, job_id, first_times)


def _shard_submits(log: str) -> list[tuple[str, str]]:
    """(shard, sbatch call) of every predict_shard job the main Snakemake submitted."""
    calls = re.findall(r"sbatch call: (.*)", log)
    pattern = re.compile(rf"--comment rule_{SHARD_RULE}_wildcards_(\w+)\b")
    return [(m.group(1), call) for call in calls if (m := pattern.search(call))]


def _job_fields(job_id: str) -> dict[str, str]:
    """``scontrol show job -d``: with what the job was given (JOB_GRES), which ``-o`` alone
    leaves out (the test cluster keeps no accounting: no gres in its TRES)."""
    output = subprocess.run(
        ["scontrol", "show", "job", "-o", "-d", job_id], capture_output=True, text=True, timeout=30
    ).stdout
    return dict(f.split("=", 1) for f in output.split() if "=" in f)


def _shard_log(run: Run, shard: str) -> Path:
    folder = logs_dir(run.workdir / WORK) / NEW_SCANS_FOLDER
    return folder / PREDICT_LOG.format(configuration=f"shard_{shard}")


def test_each_shard_is_its_own_sbatch_job_with_one_gpu(run, cluster):
    assert run.returncode == 0, run.log[-6000:]
    submits = _shard_submits(run.log)
    shards = sorted({shard for shard, _ in submits})
    assert len(shards) == 3, submits  # 5 scans in shards of 2
    # one submission per shard, the killed one's retry the only second one
    assert sorted(shard for shard, _ in submits) == sorted([*shards, run.killed_shard])
    for _, call in submits:
        assert " --gpus=1 " in f"{call} ", call
    jobs = [j for shard in shards for j in cluster.jobs_of(run.workdir, SHARD_RULE, shard)]
    assert len({job.id for job in jobs}) == len(submits) == 4, jobs
    for job in jobs:
        fields = _job_fields(job.id)  # asked for one GPU, and got one of the node's fake ones
        assert (fields.get("TresPerJob"), fields.get("JOB_GRES")) == ("gres:gpu:1", "gpu:fake:1")
    for shard in shards:
        log = _shard_log(run, shard)
        text = "".join(cluster.read(p) for p in [*earlier_attempts(log), log])
        assert re.search(r"predict: \d case\(s\) on cpu", text), text  # torch saw no CUDA
    # (a kill during a write leaves that write's hidden temporary, ".<name>.<random>.nii.gz")
    ending = ".nii.gz"
    written = [p.name for p in run.output.glob(f"[!.]*{ending}")]
    assert sorted(written) == [f"{c}{ending}" for c in run.cases]
    with (run.output / "summary.tsv").open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert [row["case"] for row in rows] == run.cases
    assert not (run.output / "failed.tsv").exists()


def test_a_shard_killed_half_way_is_resubmitted_and_predicts_only_its_missing_case(run, cluster):
    assert run.returncode == 0, run.log[-6000:]
    jobs = cluster.jobs_of(run.workdir, SHARD_RULE, run.killed_shard)
    assert [(j.id, j.state) for j in jobs][:1] == [(run.killed_job, "FAILED")], jobs
    assert [j.state for j in jobs] == ["FAILED", "COMPLETED"], jobs
    assert f"SLURM-job '{run.killed_job}' failed" in run.log
    log = _shard_log(run, run.killed_shard)
    attempts = earlier_attempts(log)
    assert len(attempts) == 1, attempts
    killed, retry = attempts[0].read_text(), log.read_text()
    assert f"shard {run.killed_shard}: 2 of 2 case(s) to predict" in killed, killed
    assert "case(s) predicted" not in killed, killed  # it died before its end
    assert f"shard {run.killed_shard}: 1 of 2 case(s) to predict" in retry, retry
    assert f"shard {run.killed_shard}: 1 case(s) predicted, 0 failed" in retry, retry
    segmentation = run.output / f"{run.cases[0]}.nii.gz"
    record = case_record_path(run.output, run.cases[0])
    assert (segmentation.stat().st_mtime_ns, record.stat().st_mtime_ns) == run.first_times
    assert case_record_path(run.output, run.cases[1]).is_file()
