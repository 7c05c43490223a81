"""DDP training for real on the CPU (gloo): ``-num_gpus 2``, torchrun single- and two-node.

The tiny preprocessed dataset is built once for this module by the ``env`` fixture
(tests/conftest.py: the real commands, a ``3d_tiny`` plans override). Each run
trains a few iterations to the end, including the final validation, so every collective of the
path is exercised. The equivalence test runs the trainer in two spawned gloo ranks and in this
process and compares losses and weights step by step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nnunet_core.cluster import stop_signal
from nnunet_core.layout.roots import Roots
from nnunet_core.model import checkpoint as ckpt
from nnunet_core.training.distributed import find_free_port
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli

pytestmark = pytest.mark.slow

SHORT = ["--epochs", "1", "--iterations", "2", "--val-iterations", "1", "--num-workers", "0"]
TORCHRUN = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"


def fold_folder(env: dict[str, str], fold: int | str) -> Path:
    return Path(env["nnUNet_results"]) / DATASET / MODEL / f"fold_{fold}"


def assert_one_set_of_files(folder: Path) -> str:
    """The fold has one log, a final checkpoint, a summary and no temporaries; returns the log."""
    names = sorted(p.name for p in folder.iterdir())
    logs = [n for n in names if n.startswith("training_log_")]
    assert len(logs) == 1, names
    assert ckpt.FINAL in names and ckpt.LATEST not in names, names
    assert not [n for n in names if n.startswith(".") and n != ".training.lock"], names
    assert (folder / "validation" / "summary.json").is_file()
    record = json.loads((folder / "provenance.json").read_text())
    assert [a["status"] for a in record["attempts"]] == ["finished"]
    final = torch.load(folder / ckpt.FINAL, weights_only=True)
    assert not any(k.startswith("module.") for k in final["network_weights"])
    return (folder / logs[0]).read_text()


def test_num_gpus_2_trains_on_two_gloo_ranks_with_one_set_of_files(env) -> None:
    args = ["900", CONFIG, "0", "-device", "cpu", "-num_gpus", "2", *SHORT]
    result = check(cli(env, *args, module="nnunet_core.train"))
    log = assert_one_set_of_files(fold_folder(env, 0))
    assert "DDP rank 0/2" in log and "DDP rank 1/2" in log
    assert "forced [False]" in log and "forced [True]" in log  # bs 2: rank 1 takes the fg sample
    assert "DDP rank 1/2" in result.stdout  # each rank announces itself on stdout
    assert log.count("Mean Validation Dice") == 1


def test_num_gpus_2_under_torchrun_is_an_error(env) -> None:
    launcher = {**env, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    result = cli(launcher, "train", "900", CONFIG, "0", "-device", "cpu", "-num_gpus", "2")
    assert result.returncode != 0
    assert "launcher decides" in result.stderr


def test_torchrun_nproc_per_node_2_trains_to_the_end(env) -> None:
    port = str(find_free_port())
    command = [TORCHRUN, "--nproc_per_node", "2", "--master_port", port, "-m", "nnunet_core.train"]
    command += ["900", CONFIG, "1", "-device", "cpu", *SHORT]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    check(result)
    log = assert_one_set_of_files(fold_folder(env, 1))
    assert "DDP rank 1/2" in log


def test_two_torchrun_agents_on_localhost_train_as_two_nodes(env) -> None:
    """``--nnodes 2`` with c10d rendezvous: each agent is a 'node' with one process."""
    endpoint = f"localhost:{find_free_port()}"
    command = [TORCHRUN, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d"]
    command += ["--rdzv_endpoint", endpoint, "--rdzv_id", "two-nodes", "-m", "nnunet_core.train"]
    command += ["900", CONFIG, "2", "-device", "cpu", *SHORT]
    agents = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(2)
    ]
    outputs = [agent.communicate(timeout=300)[0].decode() for agent in agents]
    for agent, output in zip(agents, outputs, strict=True):
        assert agent.returncode == 0, output
    log = assert_one_set_of_files(fold_folder(env, 2))
    # both agents' processes are local rank 0 of a one-process 'node' (same host here)
    assert "DDP rank 0/2 (local 0/1)" in log and "DDP rank 1/2 (local 0/1)" in log


# ------------------------------------------------------------------------- equivalence
STEPS = 4


def _setup(env: dict[str, str], output: Path):
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots.from_env(env["nnUNet_raw"], env["nnUNet_preprocessed"], env["nnUNet_results"])
    setup = prepare_fold(roots, DATASET, CONFIG, 0, "nnUNetPlans", "nnUNetTrainer")
    return dataclasses.replace(setup, output_folder=output)


def _train_steps(setup, topology) -> tuple[list[float], dict[str, torch.Tensor], list[list[bool]]]:
    """``STEPS`` training steps of epoch 0; global losses (weighted sum over ranks) and weights."""
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.training.distributed import sum_over_ranks

    settings = TrainerSettings(
        num_epochs=10, num_workers=0, seed=3, is_main=topology.is_main, disable_checkpointing=True
    )
    trainer = Trainer(setup, settings, torch.device("cpu"), topology)
    loader, _ = trainer._loaders()
    losses = []
    for iteration in range(STEPS):
        loss = trainer.train_step(loader(0, iteration))
        losses.append(float(sum_over_ranks([loss * trainer.loss_share])[0]))
    weights = {k: v.detach().clone() for k, v in trainer.network.state_dict().items()}
    return losses, weights, [list(loader.forced_positions)]


def _rank_worker(rank: int, world_size: int, port: int, setup, out: str) -> None:
    import torch.distributed as dist

    from nnunet_core.cluster.process_topology import Topology

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="localhost", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        topology = Topology(rank, rank, world_size, world_size)
        losses, weights, forced = _train_steps(setup, topology)
        torch.save({"losses": losses, "weights": weights, "forced": forced}, f"{out}.{rank}")
    finally:
        dist.destroy_process_group()


def test_two_ranks_equal_one_process_with_the_same_global_batch(env, tmp_path: Path) -> None:
    """Same data (global sample seeds), same loss per step and the same weights after STEPS.

    Tolerance: the two runs differ only in float32 summation order (per-rank partial sums of the
    conv gradients, averaged by DDP, vs one sum over the batch) and in the coarsest deep
    supervision head, which DDP keeps at weight 1e-6 so every parameter gets a gradient. Both
    are ~1e-6 relative; a wrong batch split, foreground pattern or Dice reduction changes the
    loss in the first decimals (the Dice of one sample vs of the batch differs by > 1e-2).
    """
    from nnunet_core.cluster.process_topology import SINGLE_PROCESS

    setup = _setup(env, tmp_path / "ddp")
    assert int(setup.configuration.batch_size) == 2
    port = find_free_port()
    torch.multiprocessing.start_processes(
        _rank_worker,
        args=(2, port, setup, str(tmp_path / "rank")),
        nprocs=2,
        join=True,
        start_method="spawn",
    )
    ranks = [torch.load(f"{tmp_path / 'rank'}.{r}", weights_only=True) for r in range(2)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single_losses, single_weights, _ = _train_steps(
            _setup(env, tmp_path / "single"), SINGLE_PROCESS
        )
    finally:
        torch.set_num_threads(threads)
    assert ranks[0]["forced"] == [[False]] and ranks[1]["forced"] == [[True]]
    assert ranks[0]["losses"] == ranks[1]["losses"]  # the logged loss is the global one
    print("losses single", single_losses, "ddp", ranks[0]["losses"])
    torch.testing.assert_close(
        torch.tensor(ranks[0]["losses"]), torch.tensor(single_losses), rtol=1e-4, atol=1e-5
    )
    worst = 0.0
    for name, value in single_weights.items():
        for rank in ranks:
            torch.testing.assert_close(rank["weights"][name], value, rtol=1e-4, atol=2e-5)
            worst = max(worst, float((rank["weights"][name] - value).abs().max()))
    print(f"largest weight difference after {STEPS} steps: {worst:.2e}")


def test_usr1_to_a_relayed_torchrun_node_stops_both_ranks_at_one_epoch(env) -> None:
    """One node of a multi-node fold as srun starts it: relay + torchrun, 2 ranks, in a process
    group of its own (SLURM's proctrack/pgid); SIGUSR1 to the group after the first checkpoint.
    """
    folder = fold_folder(env, 3)
    # torchrun as the multi-node launcher runs it: its exit status is the stopped fold's
    command = [sys.executable, "-m", "nnunet_core.cluster.stop_relay", sys.executable, "-m"]
    command += ["nnunet_core.training.torchrun_launch"]
    command += ["--nnodes", "1", "--nproc_per_node", "2", "--rdzv_backend", "c10d"]
    command += ["--rdzv_endpoint", f"localhost:{find_free_port()}", "-m", "nnunet_core.train"]
    command += ["900", CONFIG, "3", "-device", "cpu", "--epochs", "40", "--iterations", "2"]
    command += ["--val-iterations", "1", "--num-workers", "0", "--save-every", "1"]
    node = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + 240
    while not (folder / ckpt.LATEST).exists():
        assert node.poll() is None, node.communicate()[0].decode()
        assert time.monotonic() < deadline, "no checkpoint_latest.pth after 240 s"
        time.sleep(0.1)
    os.killpg(node.pid, signal.SIGUSR1)
    output = node.communicate(timeout=240)[0].decode()
    assert node.returncode == stop_signal.EXIT_STOPPED, output
    log = next(folder.glob("training_log_*.txt")).read_text()
    stops = re.findall(r"stopped at epoch (\d+) by SIGUSR1", log)
    assert len(stops) == 1, log[-3000:]  # rank 0 logs once; both ranks agreed on the epoch
    assert int(stops[0]) < 39, stops  # long before the end of the schedule
    assert not (folder / ckpt.FINAL).exists()
    latest = torch.load(folder / ckpt.LATEST, weights_only=False)
    assert latest["current_epoch"] == int(stops[0]) + 1, latest["current_epoch"]
