"""Config ``dataset.msd`` (issue 49 item 4): the run converts the MSD task as its first job,
``convert_msd`` (``nnunet-core convert-msd``), into ``work_dir/raw/Dataset{id}_{name}``. A dry run
plans it before every other job; a real run up to the integrity check (``verify_dataset``) runs it
on a tiny task. The refusals of a bad task: tests/unit/workflow/test_msd_config.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers.nifti_tasks import make_task
from tests.helpers.workflow import job_counts, snakemake, tiny_config


def _msd_config(tmp_path: Path) -> dict:
    task = make_task(tmp_path, "Task05_Tiny", 1, n_train=2)
    config = tiny_config(tmp_path / "work", id=512, name="Tiny", msd=str(task), raw_root=None)
    config["dataset"]["synthetic"] = {"enabled": False}
    return config


def _jobs_waiting_for_none(output: str) -> list[str]:
    """The dry run's jobs whose reason names no input another job makes (the first to run)."""
    ready, job = [], None
    for line in output.splitlines():
        match = re.match(r"^(?:rule|checkpoint) (\w+):$", line)
        job = match.group(1) if match else job
        if line.strip().startswith("reason:") and "updated by another job" not in line:
            ready.append(job)
    return ready


def test_an_msd_task_is_converted_by_the_first_job(tmp_path: Path) -> None:
    config = _msd_config(tmp_path)
    dry = snakemake(tmp_path, config, "-n")
    counts = job_counts(dry.stdout)
    assert counts["convert_msd"] == 1
    assert "synthesize_dataset" not in counts
    assert _jobs_waiting_for_none(dry.stdout) == ["convert_msd"]  # every other job waits for it

    raw = tmp_path / "work" / "raw" / "Dataset512_Tiny"
    verify = tmp_path / "work" / "preprocessed" / "Dataset512_Tiny" / "verify.json"
    real = snakemake(tmp_path, config, str(verify))
    assert job_counts(real.stdout + real.stderr) == {"convert_msd": 1, "verify_dataset": 1}
    dataset = json.loads((raw / "dataset.json").read_text())
    assert dataset["channel_names"] == {"0": "CT"}
    assert sorted(p.name for p in (raw / "imagesTr").iterdir()) == [
        "tiny_000_0000.nii.gz",
        "tiny_001_0000.nii.gz",
    ]
    assert verify.is_file()
