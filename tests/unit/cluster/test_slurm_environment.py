"""A SLURM job as the trainer sees it: whether it runs in one, its end time, its rank variables.

``squeue``/``scontrol`` are replaced by a function returning what they print, so the checks are
the commands asked, in order, and the end time read from their output.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from nnunet_core.cluster.slurm import SlurmEnvironment, slurm_time

END = "2025-03-04T05:06:07"
EXPECTED = dt.datetime.fromisoformat(END).timestamp()


def fake(outputs: dict, calls: list | None = None):
    def run(command, **_kwargs):
        if calls is not None:
            calls.append(command)
        stdout, code = outputs[command[0]]
        return SimpleNamespace(stdout=stdout, returncode=code)

    return run


def test_active_only_with_a_job_id() -> None:
    assert SlurmEnvironment({"SLURM_JOB_ID": "7"}).is_active()
    assert not SlurmEnvironment({"SLURM_JOB_ID": ""}).is_active()
    assert not SlurmEnvironment({"SLURM_LOCALID": "0", "LSB_JOBID": "4"}).is_active()
    assert SlurmEnvironment({"SLURM_JOB_ID": "7"}).job_id() == "7"
    assert SlurmEnvironment({}).job_id() is None


def test_end_time_from_env_squeue_and_scontrol() -> None:
    assert SlurmEnvironment({}, run=fake({})).end_time() is None
    from_env = {"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1741060000"}
    assert SlurmEnvironment(from_env, run=fake({})).end_time() == 1741060000.0
    job = {"SLURM_JOB_ID": "7"}
    calls: list = []
    squeue = fake({"squeue": (END + "\n", 0)}, calls)
    assert SlurmEnvironment(job, run=squeue).end_time() == EXPECTED
    assert calls == [["squeue", "-h", "-j", "7", "-o", "%e"]]
    scontrol = f"JobId=7 JobName=x\n   StartTime=2025-03-04T01:00:00 EndTime={END} Deadline=N/A"
    calls.clear()
    run = fake({"squeue": ("", 1), "scontrol": (scontrol, 0)}, calls)
    assert SlurmEnvironment(job, run=run).end_time() == EXPECTED
    assert [c[0] for c in calls] == ["squeue", "scontrol"]
    assert SlurmEnvironment(job, run=fake({"squeue": ("Unknown\n", 0)})).end_time() is None


def test_no_end_time_when_both_commands_fail_or_are_missing() -> None:
    failing = fake({"squeue": ("", 1), "scontrol": ("", 1)})
    assert SlurmEnvironment({"SLURM_JOB_ID": "7"}, run=failing).end_time() is None

    def missing(command, **_kwargs):
        raise FileNotFoundError(command[0])

    assert SlurmEnvironment({"SLURM_JOB_ID": "7"}, run=missing).end_time() is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1741060000", 1741060000.0),
        (END, EXPECTED),
        ("Unknown", None),
        ("N/A", None),
        ("", None),
        ("next week", None),
    ],
)
def test_slurm_time_forms(text: str, expected: float | None) -> None:
    assert slurm_time(text) == expected


def test_topology_of_the_task_variables() -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NTASKS": "8",
        "SLURM_NTASKS_PER_NODE": "4(x2)",
        "SLURM_NODEID": "1",
    }
    slurm = SlurmEnvironment(env)
    answers = (slurm.global_rank(), slurm.local_rank(), slurm.world_size())
    assert answers == (5, 1, 8)
    assert (slurm.local_world_size(), slurm.node()) == (4, 1)
    assert SlurmEnvironment({"SLURM_NTASKS_PER_NODE": "2,1"}).local_world_size() == 2


def test_unset_or_unreadable_variables_tell_nothing() -> None:
    slurm = SlurmEnvironment({"SLURM_JOB_ID": "7", "SLURM_PROCID": "", "SLURM_LOCALID": "x"})
    answers = (slurm.global_rank(), slurm.local_rank(), slurm.world_size())
    assert answers == (None, None, None)
    assert (slurm.local_world_size(), slurm.node()) == (None, None)
