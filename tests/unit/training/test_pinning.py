"""Pinned batches on CUDA only (``training.data.pinning``): the pin thread's order, bound, errors
and close with a fake pin function (pinning needs CUDA, which this CPU build of torch lacks), and
the trainer's streams: untouched on the CPU, pinned on a faked CUDA device."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from nnunet_core import Trainer
from nnunet_core.training.data import pinning
from nnunet_core.training.data.pinning import PinnedBatches, pin_tree, pinned_on
from nnunet_core.training.data.workers import BatchStream, WorkerError


class FakePin:
    """Records what it pinned and in which thread; returns a marked copy."""

    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.count = 0

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        self.threads.add(threading.current_thread().name)
        self.count += 1
        return tensor + 1000


class Source:
    """Batches 0, 1, 2, ... (a dict like the loader's), counting how many were taken."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.taken = 0
        self.closed = False
        self.fail_at = fail_at

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self.taken == self.fail_at:
            msg = f"worker failed on batch {self.taken}"
            raise WorkerError(msg)
        batch = {"data": torch.full((2,), self.taken), "target": [torch.zeros(1)], "keys": ["a"]}
        self.taken += 1
        return batch

    def close(self) -> None:
        self.closed = True


def test_pin_tree_pins_every_tensor_and_keeps_the_rest() -> None:
    pin = FakePin()
    batch = {"data": torch.zeros(2), "target": [torch.ones(1), (torch.ones(1),)], "keys": ["x"]}
    pinned = pin_tree(batch, pin)
    assert pin.count == 3
    assert pinned["data"].tolist() == [1000.0, 1000.0]
    assert pinned["target"][0].item() == 1001.0 and pinned["target"][1][0].item() == 1001.0
    assert isinstance(pinned["target"][1], tuple) and pinned["keys"] == ["x"]


def test_the_pin_thread_delivers_in_order_pinned_and_stays_depth_ahead() -> None:
    pin, source = FakePin(), Source()
    started: list[str] = []
    with PinnedBatches(
        source, pin, depth=2, on_start=lambda: started.append(threading.current_thread().name)
    ) as batches:
        got = [next(batches)["data"][0].item() for _ in range(5)]
        time.sleep(0.3)  # the thread fills its queue and waits
        assert source.taken <= 5 + 2 + 1  # two queued, one pinned waiting to be queued
    assert got == [1000.0, 1001.0, 1002.0, 1003.0, 1004.0]
    assert started == ["batch-pin"] and pin.threads == {"batch-pin"}
    assert source.closed  # closing the pinned batches closes their stream


def test_an_error_of_the_stream_reaches_the_consumer_as_it_is() -> None:
    source = Source(fail_at=2)
    batches = PinnedBatches(source, FakePin())
    assert [next(batches)["data"][0].item() for _ in range(2)] == [1000.0, 1001.0]
    with pytest.raises(WorkerError, match="worker failed on batch 2"):
        next(batches)
    assert source.closed
    with pytest.raises(WorkerError, match="closed"):
        next(batches)


def test_a_failing_pin_is_raised_by_next() -> None:
    def broken(_tensor: torch.Tensor) -> torch.Tensor:
        msg = "CUDA error: out of memory (pinned)"
        raise RuntimeError(msg)

    with PinnedBatches(Source(), broken) as batches, pytest.raises(RuntimeError, match="pinned"):
        next(batches)


def test_pinned_on_the_cpu_is_the_stream_itself() -> None:
    source = Source()
    with pinned_on(torch.device("cpu"), source) as batches:
        assert batches is source
    assert not source.closed  # the stream's owner closes it, as before


# ------------------------------------------------------------------- the trainer's streams
def _make_batch(epoch: int, iteration: int) -> dict[str, Any]:
    return {"data": torch.tensor([epoch, iteration]), "target": [torch.zeros(1)]}


def _trainer(device: str) -> SimpleNamespace:
    """What ``Trainer._streams`` reads of a trainer (a fold's data is not needed for this)."""
    settings = SimpleNamespace(num_workers=0, num_iterations=3, num_val_iterations=2)
    return SimpleNamespace(
        settings=settings,
        current_epoch=4,
        device=torch.device(device),
        _loaders=lambda: (_make_batch, _make_batch),
    )


def test_the_cpu_training_streams_are_not_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pinning(*_args: Any) -> torch.Tensor:
        raise AssertionError("a CPU fold pinned a batch")

    monkeypatch.setattr(torch.Tensor, "pin_memory", no_pinning)
    monkeypatch.setattr(pinning, "pin_tensor", no_pinning)
    with Trainer._streams(_trainer("cpu")) as (train, val):
        assert type(train) is BatchStream and type(val) is BatchStream
        assert next(train)["data"].tolist() == [4, 0]
        assert next(val)["data"].tolist() == [4, 0]


def test_the_cuda_training_streams_are_pinned_in_the_rank_devices_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CUDA is faked: a ``cuda:1`` device object, ``torch.cuda.set_device`` recorded, and the
    pin function replaced (a CPU build cannot pin)."""
    pin, devices = FakePin(), []
    monkeypatch.setattr(pinning, "pin_tensor", pin)
    monkeypatch.setattr(torch.cuda, "set_device", lambda d: devices.append((d, _thread())))
    with Trainer._streams(_trainer("cuda:1")) as (train, val):
        assert type(train) is PinnedBatches and type(val) is PinnedBatches
        assert next(train)["data"].tolist() == [1004, 1000]
        assert next(train)["data"].tolist() == [1004, 1001]
        assert next(val)["data"].tolist() == [1004, 1000]
    assert devices == [(torch.device("cuda", 1), "batch-pin")] * 2
    assert pin.threads == {"batch-pin"}


def _thread() -> str:
    return threading.current_thread().name
