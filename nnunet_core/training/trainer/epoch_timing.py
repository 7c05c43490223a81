"""Where an epoch's training iterations spent their time: waiting for data or computing.

A GPU that waits for CPU augmentation is the commonest reason a fold trains slower than it could
(upstream issue #3063: 40 % GPU busy with 8 workers). Each epoch therefore records the seconds
its training iterations were blocked in ``next(loader)`` ("data wait") and the rest of their
wall time ("compute": forward, backward, optimizer step), plus on CUDA the peak GPU memory of
the epoch. The log, the progress record, ``progress.png`` and the report show them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

MIB = 2**20


@dataclass(frozen=True)
class EpochTiming:
    """One epoch's training iterations: seconds waiting for batches, seconds computing."""

    data_wait: float
    compute: float
    peak_gpu_memory_mb: float | None  # None off CUDA

    @property
    def wait_share(self) -> float:
        """Data wait as a share of the training iterations' wall time (0 when nothing ran)."""
        total = self.data_wait + self.compute
        return self.data_wait / total if total > 0 else 0.0

    def line(self) -> str:
        """The log line (``report.history`` parses it back for folds without checkpoints)."""
        text = (
            f"Data wait: {self.data_wait:.2f} s, compute: {self.compute:.2f} s "
            f"({100 * self.wait_share:.0f} % of the training iterations waiting for data)"
        )
        if self.peak_gpu_memory_mb is not None:
            text += f"; peak GPU memory {self.peak_gpu_memory_mb:.0f} MB"
        return text


class EpochTimer:
    """Times the training iterations of one epoch: ``batches`` yields batches, counting the
    seconds each ``next`` blocked; ``finish`` closes the epoch.

    CUDA runs asynchronously, so a step's kernels may still be running when the next ``next``
    starts. Synchronising after every step would cost throughput, so the device is synchronised
    once, at the end of the epoch: compute is then the iterations' wall time minus the data
    wait, and queued GPU work is counted as compute, not as waiting.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.data_wait = 0.0
        self._start = time.perf_counter()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)

    def batches(self, stream: Iterator[Any], count: int) -> Iterator[Any]:
        """``count`` batches of ``stream``; the time blocked in ``next`` counts as data wait."""
        for _ in range(count):
            before = time.perf_counter()
            batch = next(stream)
            self.data_wait += time.perf_counter() - before
            yield batch

    def finish(self) -> EpochTiming:
        peak = None
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device) / MIB
        wall = time.perf_counter() - self._start
        return EpochTiming(self.data_wait, max(0.0, wall - self.data_wait), peak)
