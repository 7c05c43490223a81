"""Where a training process sits among the ranks of its job: the answer, and how it is found.

The global rank and world size come from the process group; the local rank and local world size
(which GPU of the node is this rank's, how many ranks share the node) from the environment's
variables (``environment.local_from_env``), else from the host names of all ranks, gathered by the
caller's collective (this package does not import torch).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nnunet_core.cluster.environment import local_from_env
from nnunet_core.errors import ConfigurationError


@dataclass(frozen=True)
class Topology:
    """Where this process sits; ``global_rank == 0`` is the one process that writes results."""

    global_rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    hostname: str = ""

    @property
    def is_main(self) -> bool:
        return self.global_rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def describe(self) -> str:
        host = f" on {self.hostname}" if self.hostname else ""
        return (
            f"rank {self.global_rank}/{self.world_size} "
            f"(local {self.local_rank}/{self.local_world_size}){host}"
        )


SINGLE_PROCESS = Topology(hostname=socket.gethostname())


def local_from_hostnames(hostnames: Sequence[str], global_rank: int) -> tuple[int, int]:
    """(local rank, local world size) from every rank's host name (index = global rank)."""
    mine = hostnames[global_rank]
    same = [r for r, name in enumerate(hostnames) if name == mine]
    return same.index(global_rank), len(same)


def resolve_topology(
    global_rank: int,
    world_size: int,
    environ: Mapping[str, str] | None,
    gather_hostnames: Callable[[str], Sequence[str]],
) -> Topology:
    """The topology: variables first, else ``gather_hostnames`` (a collective: every rank calls
    it with its host name and gets all ranks' names in rank order)."""
    hostname = socket.gethostname()
    local_rank, local_size = local_from_env(environ)
    if local_rank is None or local_size is None:
        names = list(gather_hostnames(hostname))
        rank_h, size_h = local_from_hostnames(names, global_rank)
        local_rank = rank_h if local_rank is None else local_rank
        local_size = size_h if local_size is None else local_size
    if not 0 <= local_rank < local_size <= world_size:
        msg = (
            f"inconsistent topology: local rank {local_rank} of {local_size}, "
            f"world size {world_size}"
        )
        raise ConfigurationError(msg)
    return Topology(global_rank, local_rank, world_size, local_size, hostname)
