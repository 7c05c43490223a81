"""The stop signal: which signal asks a training to stop before the walltime, and who does what.

A batch scheduler warns a job before its time limit with a signal (profiles/slurm asks for
``--signal=${NNUNET_STOP_SIGNAL}@600``); SLURM sends it to every process of the job step, so
each process between the scheduler and the trainer must know its part. This module is the one
place that decides it; every process gets its behaviour from one of the role functions below.

=============  ==========================================  ========================================
role           process                                     behaviour
=============  ==========================================  ========================================
Snakemake      every process that parses the workflow      ignores it (``for_workflow_process``,
               (the main one and each job's)               called by workflow/rules/common.smk)
rule shell     the shell that runs a rule's command        ignores it (inherited: an ignored
                                                           disposition survives fork and exec)
retry runner   ``cluster.retry``, through which the        forwards it to the command's process
               train rule's shell starts a fold            group (``forward``), which it starts
                                                           with the signal ignored
launcher       ``train -num_gpus N`` (spawns the ranks)    forwards it to the ranks (``forward``)
relay          ``cluster.stop_relay`` on each node of a    forwards it to the torchrun agent's
               multi-node fold                             children; the agent ignores it
trainer        every rank of ``nnunet-core train``         sets the stop flag (``for_trainer``);
                                                           the fit stops at the next epoch boundary
data worker    augmentation worker processes               ignores it (``for_data_worker``): the
                                                           trainer stops them itself
=============  ==========================================  ========================================

The signal is a setting: ``$NNUNET_STOP_SIGNAL`` (``USR1``, the default, or ``USR2`` where a
site reserves USR1). The workflow exports it before any job starts, so the SLURM profile's
``--signal`` option, Snakemake, the shells and the trainers all read the same value. A stopped
fold's ``nnunet-core train`` exits ``EXIT_STOPPED`` (its launchers, ``-num_gpus N`` and
torchrun, pass the code on), so that Snakemake's ``retries`` starts the next attempt, which
continues with ``--c``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nnunet_core.errors import ConfigurationError

ENV_VAR = "NNUNET_STOP_SIGNAL"
DEFAULT = "USR1"
CHOICES = ("USR1", "USR2")
# `nnunet-core train`'s exit status for "stopped before the walltime, continue on retry"
# (EX_TEMPFAIL of sysexits.h: a temporary failure, try again).
EXIT_STOPPED = 75

_requested = False  # set by the trainer's handler; read at epoch boundaries


# ---------------------------------------------------------------------------- the setting
def configured_name(env: Mapping[str, str] | None = None) -> str:
    """The configured signal without its ``SIG`` prefix (``USR1``); a one-line error if unknown.

    ``SIGUSR2`` and ``USR2`` are the same setting (sbatch and bsub take both spellings).
    """
    env = os.environ if env is None else env
    raw = env.get(ENV_VAR, "")
    name = raw.strip().removeprefix("SIG") or DEFAULT
    if name not in CHOICES:
        msg = f"{ENV_VAR}={raw!r}: the stop signal must be one of {', '.join(CHOICES)}"
        raise ConfigurationError(msg)
    return name


def label(env: Mapping[str, str] | None = None) -> str:
    """The signal as logs name it (``SIGUSR1``)."""
    return f"SIG{configured_name(env)}"


def signal_number(env: Mapping[str, str] | None = None) -> int | None:
    """The configured signal's number, or None on a platform without it (Windows)."""
    return getattr(signal, label(env), None)


def export_setting() -> str:
    """Check the setting and put it into this process's environment, which every job inherits."""
    name = configured_name()
    os.environ[ENV_VAR] = name
    return name


# ------------------------------------------------------------------------------ the roles
def ignore() -> bool:
    """Ignore the signal here and, through fork/exec, in children; False where it is absent.

    Usable as ``preexec_fn`` (the relay starts the torchrun agent with it).
    """
    number = signal_number()
    if number is None:
        return False
    signal.signal(number, signal.SIG_IGN)
    return True


def for_workflow_process() -> str:
    """Snakemake (and so the rule's shell): export the setting, survive the signal."""
    name = export_setting()
    ignore()
    return name


def for_data_worker() -> bool:
    """An augmentation worker: the trainer, not the signal, ends it."""
    return ignore()


def _set_flag(_signum: int, _frame: Any) -> None:
    global _requested
    _requested = True


def for_trainer() -> bool:
    """The trainer: from now on the signal only sets the stop flag (no I/O, safe any time)."""
    number = signal_number()
    if number is None:
        return False
    signal.signal(number, _set_flag)
    return True


def forward(targets: Callable[[], Iterable[int]]) -> Callable[[], None]:
    """A launcher or relay: pass the signal on to the pids ``targets()`` gives at that moment.

    Returns the function that restores the previous handler (a no-op where the signal is absent).
    """
    number = signal_number()
    if number is None:
        return lambda: None

    def send_on(signum: int, _frame: Any) -> None:
        for pid in targets():
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                continue  # already gone

    previous = signal.signal(number, send_on)
    return lambda: signal.signal(number, previous)


# ------------------------------------------------------------------------------ the flag
def stop_requested() -> bool:
    return _requested


def reset_stop_request() -> None:
    global _requested
    _requested = False
