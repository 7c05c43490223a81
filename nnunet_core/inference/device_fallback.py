"""Where the sliding window keeps its sums, and the move to the CPU when the device is full.

Upstream (``perform_everything_on_device``) keeps the case and the sums on the device and, when
that attempt raises, repeats it with them on the CPU; ``--not_on_device`` starts on the CPU. The
network runs on the device either way: only the case, the tile weights and the sums move.

The retry must not run beside the failed attempt's tensors. While an ``except`` block runs, the
exception's traceback holds the failed frames and with them every tensor they made on the device
(the case's copy, the sums, the tile batch, the network's output), so the cache cannot give that
memory back and the retry meets the same full device. ``on_device_or_cpu`` therefore keeps only
the message, clears the failed frames' variables (the exception may be held elsewhere too),
leaves the handler (which drops the exception and its frames), empties the cache, and only then
retries.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")
CPU = torch.device("cpu")

# Lower-case pieces of the messages of an allocation that failed on an accelerator. Upstream
# catches every RuntimeError, since cuDNN and cuBLAS report a failed allocation as a plain
# RuntimeError; we recognise those by their message instead, so that an unrelated error (a
# shape mismatch, a NaN check, a bug in a user's network) is raised at once with its own
# traceback rather than hidden behind a slower second attempt that fails the same way.
OUT_OF_MEMORY_MESSAGES = (
    "out of memory",  # the caching allocators (CUDA, HIP, MPS, XPU), "CUDA error: out of memory"
    "alloc_failed",  # CUBLAS_STATUS_ALLOC_FAILED, CUDNN_STATUS_ALLOC_FAILED
    # cuDNN finds no convolution algorithm when none's workspace fits in what is left
    "unable to find a valid cudnn algorithm",
)


def is_out_of_memory(error: BaseException) -> bool:
    """``error`` says that the device had no memory left (see ``OUT_OF_MEMORY_MESSAGES``)."""
    if isinstance(error, torch.cuda.OutOfMemoryError):
        return True
    if not isinstance(error, RuntimeError):
        return False
    text = str(error).lower()
    return any(piece in text for piece in OUT_OF_MEMORY_MESSAGES)


def results_device(device: torch.device, on_device: bool = True) -> torch.device:
    """Where the case and the sums live: on ``device``, or on the CPU (``--not_on_device``)."""
    return device if on_device else CPU


def can_fall_back(device: torch.device) -> bool:
    """Sums on an accelerator can move to the CPU; sums already on the CPU cannot go anywhere."""
    return device.type != "cpu"


def release_device_memory(device: torch.device) -> None:
    """Give the device's cached free blocks back (what upstream's ``empty_cache`` does)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (CUDA's continues with allocator statistics)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def report(line: str) -> None:
    """One line on stderr (beside the job's other messages, out of the way of stdout's)."""
    print(line, file=sys.stderr, flush=True)


def on_device_or_cpu(attempt: Callable[[torch.device], T], device: torch.device) -> T:
    """``attempt(device)``; if the device runs out of memory, ``attempt(cpu)`` once, after the
    failed attempt's tensors are gone and the cache is emptied.

    ``attempt`` takes the device to keep its results on; it must hold no tensor on ``device``
    itself (its own frame makes them), or they would outlive the failure.
    """
    if not can_fall_back(device):
        return attempt(device)
    reason: str | None = None
    try:
        return attempt(device)
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        reason = f"{type(error).__name__}: {first_line(error)}"
        traceback.clear_frames(error.__traceback__)  # the failed attempt's tensors, wherever
    # out of the handler: the exception, its traceback and the failed frames are released here
    release_device_memory(device)
    report(
        f"sliding window: out of memory with the sums on {device} ({reason}); predicting this "
        "case again with them on the CPU (slower; --not_on_device starts there)"
    )
    return attempt(CPU)
