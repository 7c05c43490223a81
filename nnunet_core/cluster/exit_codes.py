"""What a fold job's exit status means, and whether a second attempt can succeed.

One table for every process between the workflow and the trainer (the retry loop of a local run,
the marker a cluster job leaves for its resubmission): a retry helps after a walltime stop,
a preemption, a lost node or an out-of-memory kill; it does not after a wrong configuration, a
broken dataset, a user's code that raised, a full disk, or a stop the user asked for.
"""

from __future__ import annotations

import signal

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from nnunet_core.errors import NnunetCoreError

EXIT_OK = 0
EXIT_FAILED = 1  # an unexpected failure (a transient I/O or NCCL error, a crash): retried
EXIT_USAGE = 2  # ConfigurationError, DatasetError, argparse: the user's config or data
EXIT_USER_CODE = 3  # UserCodeError: a user trainer's import, class or hook raised
# (3 is also "this fold, or this work_dir, is held by another process": a retry would only
# collide again, so the same answer fits)
EXIT_STORAGE = 4  # StorageError: a full, over-quota or read-only disk
EXIT_OUT_OF_MEMORY = 76  # torch ran out of device or host memory (a retry may get a larger node)
EXIT_INTERRUPTED = 130  # the user's Ctrl-C (128 + SIGINT)

NOT_RETRIED = {
    EXIT_USAGE: "the configuration or the dataset is wrong",
    EXIT_USER_CODE: "the user's trainer code failed, or another process holds the fold",
    EXIT_STORAGE: "the disk refused a write",
    EXIT_INTERRUPTED: "stopped by the user",
}
RETRIED = {
    EXIT_FAILED: "an unexpected failure",
    EXIT_STOPPED: "stopped before the walltime or its deadline",
    EXIT_OUT_OF_MEMORY: "out of memory",
}


def is_retryable(code: int, stopped_by_user: bool = False) -> bool:
    """Whether a second attempt of a job that exited ``code`` can succeed.

    A status from a signal (negative from ``subprocess``, or ``128 + n`` from a shell) counts as
    a kill from outside (preemption, a lost node, the OOM killer): retried, unless the user's
    stop sent it (``stopped_by_user``: the process that retries saw SIGINT/SIGTERM itself)."""
    if stopped_by_user or code == EXIT_OK:
        return False
    if code in NOT_RETRIED:
        return False
    return True


def describe(code: int) -> str:
    """A few words for the exit status, for the one line a failed attempt prints."""
    if code in NOT_RETRIED:
        return NOT_RETRIED[code]
    if code in RETRIED:
        return RETRIED[code]
    number = -code if code < 0 else code - 128 if code > 128 else None
    if number is not None:
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            pass
    return f"exit status {code}"


class OutOfMemoryFailure(NnunetCoreError):
    """torch (or Python) could not allocate memory: exit 76, which the workflow retries."""

    exit_code = EXIT_OUT_OF_MEMORY


def is_out_of_memory(exc: BaseException) -> bool:
    """torch's ``OutOfMemoryError`` (``torch.cuda``'s is the same class), a ``RuntimeError``
    saying "out of memory" (older torch, other devices) or Python's ``MemoryError``; recognised
    by name, so that a command that never loaded torch does not load it here."""
    if isinstance(exc, MemoryError):
        return True
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and cls.__module__.split(".")[0] == "torch":
            return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def out_of_memory_error(exc: BaseException) -> OutOfMemoryFailure | None:
    """The one-line failure for an out-of-memory exception, else None."""
    if not is_out_of_memory(exc):
        return None
    first = next((line for line in str(exc).splitlines() if line.strip()), "")[:200]
    detail = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    msg = (
        f"out of memory ({detail}); a retry may get a node with more memory, "
        "else lower the patch or batch size"
    )
    return OutOfMemoryFailure(msg)
