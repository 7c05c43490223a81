"""A fold's GPUs before anything runs on them (``training.gpu_ordinals``): ``-num_gpus`` and
torchrun's ``--nproc_per_node`` against the visible GPUs, and each rank's device set before its
first collective. This torch is a CPU build: the GPU counts are faked by monkeypatching
``torch.cuda.is_available``/``device_count`` and ``set_device`` is a spy, as each test says."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from nnunet_core.cli import main
from nnunet_core.cluster.mpi import LOCAL_RANK_VARS, LOCAL_SIZE_VARS
from nnunet_core.errors import ConfigurationError
from nnunet_core.training import distributed as ddp
from nnunet_core.training import torchrun_launch
from nnunet_core.training.distributed import find_free_port
from nnunet_core.training.gpu_ordinals import check_visible, rank_ordinal

# every variable that would tell a rank its place on the node (torchrun's, SLURM's, MPI's)
LOCAL_VARIABLES = (
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE",
    *LOCAL_RANK_VARS,
    *LOCAL_SIZE_VARS,
)
LAUNCHER_VARIABLES = ("TORCHELASTIC_RUN_ID", "RANK", "WORLD_SIZE", *LOCAL_VARIABLES)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"RANK": "5", "LOCAL_RANK": "1"}, 1),  # the launcher's local rank wins
        ({"RANK": "5", "SLURM_LOCALID": "0"}, 0),
        ({"RANK": "5", "LOCAL_WORLD_SIZE": "2"}, 1),  # rank modulo the ranks per node
        ({"RANK": "6"}, 2),  # rank modulo the visible GPUs (4)
        ({}, 0),
    ],
)
def test_rank_ordinal_from_the_environment(environ: dict[str, str], expected: int) -> None:
    assert rank_ordinal(environ, visible=4) == expected


def test_a_local_rank_beyond_the_visible_gpus_is_one_line() -> None:
    environ = {"LOCAL_RANK": "2", "CUDA_VISIBLE_DEVICES": "4,5"}
    with pytest.raises(ConfigurationError) as error:
        rank_ordinal(environ, visible=2)
    assert str(error.value) == (
        "local rank 2 needs GPU 2 but 2 GPU(s) visible (CUDA_VISIBLE_DEVICES=4,5): "
        "start at most 2 process(es) per node"
    )


def test_check_visible_names_the_request_the_count_and_the_variable() -> None:
    check_visible(2, "-num_gpus 2", visible=2, environ={})
    with pytest.raises(ConfigurationError, match=r"^-num_gpus 3 needs 3 GPU\(s\) but 2 visible "):
        check_visible(3, "-num_gpus 3", visible=2, environ={})
    with pytest.raises(ConfigurationError, match=r"\(CUDA_VISIBLE_DEVICES unset\)"):
        check_visible(3, "-num_gpus 3", visible=2, environ={})


# --------------------------------------------------------------- before any rank starts
def test_num_gpus_beyond_the_visible_gpus_stops_before_any_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SLURM job given one GPU (``CUDA_VISIBLE_DEVICES=3``, the scheduler's: no slot lock is
    taken); ``torch.cuda.is_available``/``device_count`` are monkeypatched to say so (no CUDA
    here) and ``spawn`` records the ranks it would start."""
    monkeypatch.chdir(tmp_path)
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in ("raw", "preprocessed", "results"):
        monkeypatch.setenv(f"nnUNet_{name}", str(tmp_path / name))
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    started: list[Any] = []
    monkeypatch.setattr(ddp, "spawn", lambda *args: started.append(args) or 0)
    code = main(["train", "900", "3d_fullres", "0", "-num_gpus", "2"])
    err = capsys.readouterr().err
    assert (code, started) == (2, []), err
    assert err == (
        "nnunet-core train: error: -num_gpus 2 needs 2 GPU(s) but 1 visible "
        "(CUDA_VISIBLE_DEVICES=3): ask the scheduler for 2 GPU(s) or use at most 1\n"
    )
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # enough: the ranks start
    assert main(["train", "900", "3d_fullres", "0", "-num_gpus", "2"]) == 0
    assert len(started) == 1


@pytest.mark.parametrize(
    ("program", "trainer_args", "refused"),
    [
        (["-m", "nnunet_core.train"], [], True),
        (["-m", "nnunet_core.train"], ["-device", "cuda"], True),
        (["-m", "nnunet_core.train"], ["-device", "cpu"], False),
        (["--no-python", "bash", "-c", "exit 0"], [], False),  # not a fold: not ours to check
    ],
)
def test_torchrun_nproc_per_node_beyond_the_visible_gpus_stops_before_torchrun(
    program: list[str],
    trainer_args: list[str],
    refused: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The multi-node launcher's torchrun on a node with one visible GPU (``torch.cuda`` counts
    monkeypatched); torchrun itself is replaced by a recorder. A CPU fold is not refused."""
    import torch.distributed.run

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    ran: list[list[str]] = []
    monkeypatch.setattr(torch.distributed.run, "main", ran.append)
    argv = ["--nnodes", "2", "--nproc_per_node", "2", *program]
    code = torchrun_launch.main([*argv, *trainer_args])
    err = capsys.readouterr().err
    if refused:
        assert (code, ran) == (2, [])
        assert err == (
            "torchrun: error: --nproc_per_node 2 needs 2 GPU(s) but 1 visible "
            "(CUDA_VISIBLE_DEVICES=0): ask the scheduler for 2 GPU(s) or use at most 1\n"
        )
    else:
        assert (code, len(ran), err) == (0, 1, "")


# ------------------------------------- the device before the first collective: real gloo
def _order_worker(rank: int, port: int, out: str) -> None:
    """One rank as a launcher that sets ``TORCHELASTIC_RUN_ID`` but no ``LOCAL_RANK`` starts
    it; records set_device (a spy: no CUDA here), joining the group and the collectives."""
    import torch.distributed as dist

    for name in LOCAL_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE="2",
        MASTER_ADDR="localhost",
        MASTER_PORT=str(port),
        TORCHELASTIC_RUN_ID="order-test",
    )
    events: list[str] = []
    real_init, real_gather = dist.init_process_group, dist.all_gather_object

    def init(*args: Any, **kwargs: Any) -> None:
        events.append(f"init_process_group {kwargs['backend']}")
        real_init(*args, **kwargs)

    def gather(*args: Any, **kwargs: Any) -> None:
        events.append("all_gather_object")
        real_gather(*args, **kwargs)

    torch.cuda.device_count = lambda: 2  # two visible GPUs
    torch.cuda.set_device = lambda device: events.append(f"set_device {device}")
    ddp.process_backend = lambda _device: "gloo"  # nccl's place: a CPU build has no NCCL
    ddp.supports_device_id = lambda: False  # a device_id would start CUDA
    dist.init_process_group, dist.all_gather_object = init, gather
    assert ddp.launch_mode(1) == ddp.EXTERNAL
    with ddp.process_group(torch.device("cuda")) as (topology, device):
        events.append(f"joined as local rank {topology.local_rank} on {device}")
    Path(f"{out}.{rank}").write_text(json.dumps(events))


def test_every_rank_sets_its_device_before_its_first_collective(tmp_path: Path) -> None:
    torch.multiprocessing.start_processes(
        _order_worker, args=(find_free_port(), str(tmp_path / "e")), nprocs=2, start_method="spawn"
    )
    for rank in range(2):
        events = json.loads(Path(f"{tmp_path / 'e'}.{rank}").read_text())
        assert events == [
            f"set_device cuda:{rank}",
            "init_process_group gloo",
            "all_gather_object",  # the host-name gather that finds the local rank
            f"joined as local rank {rank} on cuda:{rank}",
        ]
