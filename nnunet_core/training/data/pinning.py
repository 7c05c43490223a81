"""Pinned (page-locked) batches for a CUDA fold, pinned in a thread while the step runs.

The data workers hand batches over in shared memory, which is pageable: a ``non_blocking`` copy
from pageable memory to the GPU is staged by the driver and returns only when done, so the
trainer's copy blocks and nothing overlaps. Upstream's loader pins its batches on CUDA, in a
pin-memory thread. ``PinnedBatches`` does the same: a thread takes the next batch from the
stream, copies its tensors into pinned memory and queues it (at most ``depth`` ahead), so the
pinning runs beside the current step and the trainer's ``.to(device, non_blocking=True)`` is an
asynchronous copy. On any other device nothing changes: ``pinned_on`` hands the stream back.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from nnunet_core.training.data.workers import JOIN_S, POLL_S, WorkerError

Batches = Iterator[Any]  # what the training loop reads: a BatchStream, or its pinned copy
Pin = Callable[[torch.Tensor], torch.Tensor]
DEPTH = 2  # pinned batches ready ahead: one for the next step, one being pinned


def pin_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's copy in page-locked memory (CUDA's pinned host allocator)."""
    return tensor.pin_memory()


def pin_tree(item: Any, pin: Pin) -> Any:
    """``item`` with every tensor in its dicts, lists and tuples replaced by ``pin(tensor)``."""
    if isinstance(item, torch.Tensor):
        return pin(item)
    if isinstance(item, dict):
        return {key: pin_tree(value, pin) for key, value in item.items()}
    if type(item) in (list, tuple):  # exactly: a named tuple is returned as it is
        return type(item)(pin_tree(value, pin) for value in item)
    return item


class PinnedBatches:
    """The batches of ``source`` in order, each passed through ``pin_tree`` by a background
    thread that keeps at most ``depth`` ready. ``on_start`` runs first in that thread (on CUDA:
    set this rank's device, else the pinning would open a context on GPU 0). An error of the
    source or of the pinning is raised by the ``next`` that would have returned its batch.
    Closing also closes the source (a thread waiting in it wakes up)."""

    def __init__(
        self,
        source: Batches,
        pin: Pin,
        *,
        depth: int = DEPTH,
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self._source = source
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, args=(pin, on_start), name="batch-pin", daemon=True
        )
        self._thread.start()

    def _run(self, pin: Pin, on_start: Callable[[], None] | None) -> None:
        try:
            if on_start is not None:
                on_start()
            while not self._stop.is_set():
                if not self._put(("ok", pin_tree(next(self._source), pin))):
                    return
        except BaseException as exc:  # StopIteration and the stream's WorkerError included
            self._put(("error", exc))

    def _put(self, item: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> PinnedBatches:
        return self

    def __next__(self) -> Any:
        if self._closed:
            msg = "PinnedBatches is closed"
            raise WorkerError(msg)
        while True:
            try:
                kind, payload = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.close()
                    msg = "the batch pinning thread ended without a batch or an error"
                    raise WorkerError(msg) from None
                continue
            if kind == "error":
                self.close()
                raise payload
            return payload

    def close(self) -> None:
        """Stop the thread and close the source (idempotent); batches not read are dropped."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        close_source = getattr(self._source, "close", None)
        if close_source is not None:
            close_source()
        self._thread.join(JOIN_S)

    def __enter__(self) -> PinnedBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pinned_on(device: torch.device, stream: Batches) -> AbstractContextManager[Batches]:
    """On CUDA the stream's batches pinned by a thread (``PinnedBatches``); elsewhere the stream
    itself, untouched (nothing is pinned on the CPU)."""
    if device.type != "cuda":
        return nullcontext(stream)
    return PinnedBatches(stream, pin_tensor, on_start=lambda: torch.cuda.set_device(device))
