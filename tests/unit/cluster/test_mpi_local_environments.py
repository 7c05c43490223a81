"""MPI launchers' rank variables (the last source of a rank's place on its node) and the plain
machine, which tells nothing."""

from __future__ import annotations

import pytest

from nnunet_core.cluster.local import LocalEnvironment
from nnunet_core.cluster.mpi import MpiEnvironment


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (
            {
                "OMPI_COMM_WORLD_RANK": "5",
                "OMPI_COMM_WORLD_SIZE": "8",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
            },
            (5, 8, 1, 4),
        ),
        (
            {
                "MV2_COMM_WORLD_RANK": "3",
                "MV2_COMM_WORLD_SIZE": "4",
                "MV2_COMM_WORLD_LOCAL_RANK": "1",
                "MV2_COMM_WORLD_LOCAL_SIZE": "2",
            },
            (3, 4, 1, 2),
        ),
        (
            {"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3"},
            (2, 3, 2, 3),
        ),
        # Open MPI's variables come before hydra's where both are set
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "0", "MPI_LOCALRANKID": "3"}, (None, None, 0, None)),
    ],
)
def test_each_launchers_variables(environ: dict, expected: tuple) -> None:
    mpi = MpiEnvironment(environ)
    assert mpi.is_active()
    answers = (mpi.global_rank(), mpi.world_size(), mpi.local_rank(), mpi.local_world_size())
    assert answers == expected
    assert mpi.node() is None and mpi.end_time() is None and mpi.job_id() is None


def test_mpi_is_inactive_without_a_rank() -> None:
    assert not MpiEnvironment({}).is_active()
    assert not MpiEnvironment({"OMPI_COMM_WORLD_SIZE": "4", "RANK": "0"}).is_active()


def test_the_local_machine_is_always_active_and_tells_nothing() -> None:
    stray = {"RANK": "3", "LOCAL_RANK": "1", "SLURM_LOCALID": "0", "OMPI_COMM_WORLD_RANK": "2"}
    local = LocalEnvironment(stray)
    assert local.is_active()
    assert local.end_time() is None and local.job_id() is None
    answers = (local.global_rank(), local.local_rank(), local.world_size())
    assert answers == (None, None, None)
    assert (local.local_world_size(), local.node()) == (None, None)
