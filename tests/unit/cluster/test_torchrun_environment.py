"""A process torchrun started: the signs that count, its rank variables, its end time (the
one of the batch job it runs in), and the agent command a node runs."""

from __future__ import annotations

import pytest

from nnunet_core.cluster import torchrun
from nnunet_core.cluster.job_environment import JobEnvironment
from nnunet_core.cluster.slurm import SlurmEnvironment
from nnunet_core.cluster.torchrun import TorchrunEnvironment

TRIPLE = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}


@pytest.mark.parametrize(
    ("environ", "active"),
    [
        ({}, False),
        ({"TORCHELASTIC_RUN_ID": "x"}, True),
        ({"TORCHELASTIC_RUN_ID": ""}, True),  # set is enough, as before
        (TRIPLE, True),
        ({"RANK": "3"}, False),  # a stale lone RANK is no launcher
        ({"RANK": "0", "WORLD_SIZE": "2"}, False),  # two of three are not enough
        ({"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}, False),
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}, False),
    ],
)
def test_only_a_complete_sign_is_a_launcher(environ: dict, active: bool) -> None:
    assert TorchrunEnvironment(environ).is_active() is active


def test_topology_of_the_worker_variables() -> None:
    env = {
        "TORCHELASTIC_RUN_ID": "fold0",
        "RANK": "6",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "2",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
    }
    torchrun = TorchrunEnvironment(env)
    answers = (torchrun.global_rank(), torchrun.local_rank(), torchrun.world_size())
    assert answers == (6, 2, 8)
    assert (torchrun.local_world_size(), torchrun.node()) == (4, 1)


def test_without_its_variables_the_topology_is_unknown() -> None:
    torchrun = TorchrunEnvironment({"SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2"})
    answers = (torchrun.global_rank(), torchrun.local_rank(), torchrun.world_size())
    assert answers == (None, None, None)
    assert (torchrun.local_world_size(), torchrun.node()) == (None, None)


def test_end_time_and_job_are_the_schedulers() -> None:
    env = {**TRIPLE, "SLURM_JOB_ID": "7", "SLURM_JOB_END_TIME": "1741060000"}
    inside_slurm = TorchrunEnvironment(env, scheduler=SlurmEnvironment(env))
    assert inside_slurm.end_time() == 1741060000.0
    assert inside_slurm.job_id() == "7"
    alone = TorchrunEnvironment(env, scheduler=JobEnvironment(env))
    assert alone.end_time() is None and alone.job_id() is None
    assert TorchrunEnvironment(env).end_time() is None  # no scheduler given: none known


def test_the_device_flag_is_read_in_both_spellings() -> None:
    assert torchrun.device_flag(["-tr", "X", "-device", "cpu"]) == "cpu"
    assert torchrun.device_flag(["--device=cuda"]) == "cuda"
    assert torchrun.device_flag(["-device"]) is None  # no value follows
    assert torchrun.device_flag([]) is None


def test_an_agent_command_runs_the_launch_module_for_the_trainer() -> None:
    command = torchrun.agent_command(2, 0, "host:1", torchrun.rendezvous_id("D", "2d", "all"))
    assert command == (
        "python -m nnunet_core.training.torchrun_launch --nnodes 2 --nproc_per_node 1 "
        "--rdzv_backend c10d --rdzv_endpoint host:1 --rdzv_id D_2d_all -m nnunet_core.train"
    )
