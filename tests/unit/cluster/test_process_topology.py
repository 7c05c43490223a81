"""A rank's place on its node: from torchrun's, a scheduler's or an MPI launcher's variables,
else from the host names of all ranks (``nnunet_core.cluster.process_topology``)."""

from __future__ import annotations

import pytest

from nnunet_core.cluster.process_topology import (
    SINGLE_PROCESS,
    Topology,
    local_from_hostnames,
    resolve_topology,
)
from nnunet_core.errors import ConfigurationError


def _no_gather(_name: str) -> list[str]:
    raise AssertionError("variables were enough; no all-gather expected")


def test_topology_from_torchrun_variables() -> None:
    env = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "SLURM_LOCALID": "0"}
    topo = resolve_topology(3, 4, env, _no_gather)
    assert (topo.global_rank, topo.local_rank, topo.world_size, topo.local_world_size) == (
        3,
        1,
        4,
        2,
    )
    assert not topo.is_main and topo.distributed


@pytest.mark.parametrize(
    ("environ", "local"),
    [
        ({"SLURM_LOCALID": "2", "SLURM_NTASKS_PER_NODE": "4"}, (2, 4)),
        ({"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "4(x2)"}, (1, 4)),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "3", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (3, 4)),
        ({"MV2_COMM_WORLD_LOCAL_RANK": "0", "MV2_COMM_WORLD_LOCAL_SIZE": "4"}, (0, 4)),
        ({"MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3"}, (2, 3)),
        # rank and size are looked up on their own: torchrun's rank, SLURM's per-node count
        ({"LOCAL_RANK": "1", "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "2"}, (1, 2)),
    ],
)
def test_topology_from_scheduler_variables(environ: dict, local: tuple[int, int]) -> None:
    topo = resolve_topology(6, 8, environ, _no_gather)
    assert (topo.local_rank, topo.local_world_size) == local
    assert topo.global_rank == 6 and topo.world_size == 8


def test_topology_from_host_names_when_no_variable_is_set() -> None:
    hosts = ["a", "a", "b", "b", "b", "c"]
    assert local_from_hostnames(hosts, 0) == (0, 2)
    assert local_from_hostnames(hosts, 4) == (2, 3)
    assert local_from_hostnames(hosts, 5) == (0, 1)
    topo = resolve_topology(3, 6, {}, lambda _name: hosts)
    assert (topo.local_rank, topo.local_world_size) == (1, 3)


def test_a_missing_size_is_taken_from_the_host_names_and_the_rank_kept() -> None:
    topo = resolve_topology(2, 4, {"LOCAL_RANK": "0"}, lambda _name: ["a", "a", "b", "b"])
    assert (topo.local_rank, topo.local_world_size) == (0, 2)


def test_variables_that_do_not_fit_the_world_are_one_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="local rank 4 of 4, world size 8"):
        resolve_topology(0, 8, {"LOCAL_RANK": "4", "LOCAL_WORLD_SIZE": "4"}, _no_gather)
    with pytest.raises(ConfigurationError, match="local rank 0 of 16, world size 8"):
        resolve_topology(0, 8, {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "16"}, _no_gather)


def test_the_single_process_writes_results_and_describes_itself() -> None:
    assert SINGLE_PROCESS.is_main and not SINGLE_PROCESS.distributed
    assert Topology(5, 1, 8, 4, "node2").describe() == "rank 5/8 (local 1/4) on node2"
    assert Topology(0, 0, 2, 2).describe() == "rank 0/2 (local 0/2)"
