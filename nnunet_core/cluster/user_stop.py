"""A user's stop inside a workflow job: Ctrl-C (SIGINT) asks a fold to stop at its next epoch.

Outside a workflow, Ctrl-C ends ``nnunet-core train`` at once (KeyboardInterrupt, exit 130). A
local workflow run (``nnunet_core.workflow.user_stop``, in the main Snakemake process) exports
``NNUNET_USER_STOP=1`` before its first job and, on the user's Ctrl-C or SIGINT/SIGTERM to
Snakemake, sends SIGINT to every process of every job, then SIGTERM and SIGKILL to what is left
a few seconds later. So inside such a job SIGINT may ask for more: the trainer (``for_trainer``)
turns it into the stop signal's request (``stop_signal``: the flag that stops the fit after the
current epoch with ``checkpoint_latest``), and the fold's stopped exit becomes
``EXIT_INTERRUPTED`` (``exit_status``), which no retry loop retries
(``exit_codes.is_retryable``): the user asked for the stop, the same command continues.

The supervisor's SIGTERM/SIGKILL bound the wait; a second SIGINT changes nothing here.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from nnunet_core.cluster import stop_signal
from nnunet_core.cluster.exit_codes import EXIT_INTERRUPTED
from nnunet_core.cluster.stop_signal import EXIT_STOPPED

ENV_VAR = "NNUNET_USER_STOP"

_requested = False  # set by the SIGINT handler of for_trainer


def supervised(env: Mapping[str, str] | None = None) -> bool:
    """Whether a workflow run supervises this process's stop (it exported ``ENV_VAR``)."""
    env = os.environ if env is None else env
    return env.get(ENV_VAR, "") == "1"


def _ask_stop(_signum: int, _frame: Any) -> None:
    global _requested
    _requested = True
    number = stop_signal.signal_number()
    if number is not None:  # the stop signal's own handler: the flag, or a launcher's forwarding
        os.kill(os.getpid(), number)


def for_trainer() -> bool:
    """In a supervised job: SIGINT stops the fit at the next epoch boundary (after
    ``stop_signal.for_trainer``, whose handler it reuses). False, and Ctrl-C unchanged, else."""
    if not supervised() or stop_signal.signal_number() is None:
        return False
    signal.signal(signal.SIGINT, _ask_stop)
    return True


def requested() -> bool:
    """Whether this process got the user's stop (SIGINT in a supervised job)."""
    return _requested


def reason() -> str | None:
    """What the fold's stop line names as its reason after the user's stop, else None."""
    return "the user (SIGINT)" if _requested else None


def exit_status(code: int) -> int:
    """The command's exit status: a fold stopped (``EXIT_STOPPED``) because the user asked is
    ``EXIT_INTERRUPTED`` (never retried), said in one stderr line; any other status unchanged."""
    if code != EXIT_STOPPED or not _requested:
        return code
    print(
        f"nnunet-core train: stopped by the user; exit {EXIT_INTERRUPTED} (not retried): the "
        "same workflow command continues with --c",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_INTERRUPTED


def reset() -> None:
    """Forget a stop request (tests)."""
    global _requested
    _requested = False
