"""Launch decision, batch split and the differentiable all-reduce of ``distributed`` (the
topology: tests/unit/cluster/test_process_topology.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from nnunet_core.errors import ConfigurationError
from nnunet_core.training.data.patch_sampling import forced_mask
from nnunet_core.training.distributed import (
    EXTERNAL,
    SINGLE,
    SPAWN,
    AllReduceSum,
    batch_sizes,
    find_free_port,
    launch_mode,
    split_batch,
)

TRIPLE = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}


@pytest.mark.parametrize(
    ("environ", "num_gpus", "expected"),
    [
        ({}, 1, SINGLE),
        ({}, 2, SPAWN),
        (
            {"TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0"},
            1,
            EXTERNAL,
        ),
        ({"TORCHELASTIC_RUN_ID": "x"}, 1, EXTERNAL),
        (TRIPLE, 1, EXTERNAL),
        ({"RANK": "3"}, 2, SPAWN),  # a stale lone RANK is no launcher
        ({"RANK": "3"}, 1, SINGLE),
        ({"RANK": "0", "WORLD_SIZE": "2"}, 4, SPAWN),  # two of three are not enough
    ],
)
def test_launch_mode_matrix(environ: dict, num_gpus: int, expected: str) -> None:
    assert launch_mode(num_gpus, environ) == expected


@pytest.mark.parametrize("environ", [TRIPLE, {"TORCHELASTIC_RUN_ID": "abc"}])
def test_num_gpus_under_a_launcher_is_an_error(environ: dict) -> None:
    with pytest.raises(ConfigurationError, match="launcher decides"):
        launch_mode(2, environ)


def test_num_gpus_below_one_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match=">= 1"):
        launch_mode(0, {})


def test_batch_split_gives_the_remainder_to_the_first_ranks() -> None:
    assert batch_sizes(2, 2) == [1, 1]
    assert batch_sizes(7, 3) == [3, 2, 2]
    assert batch_sizes(12, 5) == [3, 3, 2, 2, 2]
    for bs in range(1, 20):
        for ws in range(1, bs + 1):
            shares = [split_batch(bs, ws, r) for r in range(ws)]
            assert sum(s.size for s in shares) == bs
            assert [s.offset for s in shares] == [
                sum(x.size for x in shares[:r]) for r in range(ws)
            ]
            # the forced samples over all ranks are exactly one process's pattern
            assert [f for s in shares for f in s.forced] == forced_mask(bs)


def test_upstreams_two_gpu_example_oversamples_only_on_rank_1() -> None:
    assert split_batch(2, 2, 0).forced == (False,)
    assert split_batch(2, 2, 1).forced == (True,)


def test_batch_smaller_than_world_size_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="smaller than the number of processes 4"):
        split_batch(2, 4, 0)


# ---------------------------------------------------------------- a real 2-process gloo group
def _grad_worker(rank: int, port: int, out: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="localhost", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        base = torch.arange(6, dtype=torch.float64).reshape(3, 2) + 10 * rank
        weight = torch.tensor([[1.0, -2.0], [0.5, 3.0], [2.0, 1.0]], dtype=torch.float64)
        weight = weight * (rank + 1)  # each rank weighs the global sum differently

        x = base.clone().requires_grad_(True)
        (AllReduceSum.apply(x) ** 2 * weight).sum().backward()

        y = base.clone().requires_grad_(True)
        gathered = [torch.zeros_like(y) for _ in range(2)]
        dist.all_gather(gathered, y.detach())
        gathered[rank] = y  # the differentiable reference: this rank's slot keeps the graph
        total = torch.stack(gathered).sum(0)
        (total**2 * weight).sum().backward()
        # the reference's gradient holds only this rank's own loss term; the other rank's loss
        # also depends on y, so its gradient w.r.t. y is summed in (what all_reduce does)
        reference = y.grad.clone()
        dist.all_reduce(reference)
        torch.save(
            {"allreduce": x.grad, "reference": reference, "sum": total.detach()}, f"{out}.{rank}"
        )
    finally:
        dist.destroy_process_group()


def test_all_reduce_sum_gradient_equals_all_gather_and_sum(tmp_path: Path) -> None:
    torch.multiprocessing.start_processes(
        _grad_worker, args=(find_free_port(), str(tmp_path / "g")), nprocs=2, start_method="spawn"
    )
    results = [torch.load(f"{tmp_path / 'g'}.{r}", weights_only=True) for r in range(2)]
    expected_sum = torch.arange(6, dtype=torch.float64).reshape(3, 2) * 2 + 10
    for result in results:
        torch.testing.assert_close(result["sum"], expected_sum)
        torch.testing.assert_close(result["allreduce"], result["reference"], rtol=0, atol=0)
    torch.testing.assert_close(results[0]["allreduce"], results[1]["allreduce"])
