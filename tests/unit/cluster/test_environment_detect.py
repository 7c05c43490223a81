"""Which environment ``detect`` picks, and the answers the trainer asks of it: launched by a
launcher, the job's end time, and a rank's place on its node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nnunet_core.cluster.environment import (
    detect,
    job_end_time,
    launched_externally,
    local_from_env,
    scheduler_of,
)
from nnunet_core.cluster.local import LocalEnvironment
from nnunet_core.cluster.lsf import LsfEnvironment
from nnunet_core.cluster.slurm import SlurmEnvironment
from nnunet_core.cluster.torchrun import TorchrunEnvironment

TRIPLE = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}
SLURM = {"SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1741060000"}
LSF = {"LSB_JOBID": "4242"}


def no_command(command, **_kwargs):
    raise AssertionError(f"no scheduler command expected, got {command}")


@pytest.mark.parametrize(
    ("environ", "kind"),
    [
        ({}, LocalEnvironment),
        ({"RANK": "3"}, LocalEnvironment),
        (SLURM, SlurmEnvironment),
        (LSF, LsfEnvironment),
        ({**SLURM, **LSF}, SlurmEnvironment),  # SLURM is asked first
        ({**SLURM, **TRIPLE}, TorchrunEnvironment),  # torchrun's variables first
        ({**LSF, "TORCHELASTIC_RUN_ID": "x"}, TorchrunEnvironment),
        (TRIPLE, TorchrunEnvironment),
    ],
)
def test_detect_picks_torchrun_then_the_scheduler(environ: dict, kind: type) -> None:
    picked = detect(environ)
    assert type(picked) is kind
    assert launched_externally(environ) is (kind is TorchrunEnvironment)


def test_scheduler_of_ignores_the_launcher() -> None:
    assert type(scheduler_of({**SLURM, **TRIPLE})) is SlurmEnvironment
    assert type(scheduler_of(TRIPLE)) is LocalEnvironment


def test_the_end_time_under_torchrun_is_the_slurm_jobs() -> None:
    assert job_end_time({**SLURM, **TRIPLE}, run=no_command) == 1741060000.0
    assert job_end_time(SLURM, run=no_command) == 1741060000.0
    assert job_end_time(TRIPLE, run=no_command) is None
    assert job_end_time({}, run=no_command) is None


def test_the_end_time_under_lsf_asks_bjobs_for_the_job() -> None:
    calls: list = []

    def bjobs(command, **_kwargs):
        calls.append(command)
        return SimpleNamespace(stdout="", returncode=255)

    assert job_end_time({**LSF, "TORCHELASTIC_RUN_ID": "x"}, run=bjobs) is None
    assert calls == [["bjobs", "-o", "time_left start_time runtimelimit", "-json", "4242"]]


@pytest.mark.parametrize(
    ("environ", "local"),
    [
        ({}, (None, None)),
        ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "SLURM_LOCALID": "0"}, (1, 2)),
        ({"SLURM_LOCALID": "2", "SLURM_NTASKS_PER_NODE": "4"}, (2, 4)),
        ({"LOCAL_RANK": "3"}, (3, None)),
        ({"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (0, 4)),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "1", "MPI_LOCALNRANKS": "2"}, (1, 2)),
        ({"LOCAL_RANK": "", "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2"}, (1, 2)),
    ],
)
def test_local_place_from_the_first_variables_that_tell_it(environ: dict, local: tuple) -> None:
    assert local_from_env(environ) == local
