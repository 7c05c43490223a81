"""Retry a fold's training where the exit status is known, and only when a retry can help.

``python -m nnunet_core.cluster.retry --retries N [--marker FILE] -- COMMAND [ARGS...]``

The train rule's shell starts the fold's command through this runner (``nnunet_core.workflow
.flags.training_launcher``). Snakemake's own ``retries:`` repeats a failed job whatever the
cause; this runner reads the exit status (``exit_codes.is_retryable``) and runs the command
again, up to N more times, only after a failure a second attempt can fix (a walltime stop, a
kill from outside, out of memory, an unexpected crash), never after the user's config, data or
trainer code failed. The command already carries ``--c``, so each attempt continues from the
fold's checkpoint. Before each retry it prints one line, e.g.
``attempt 2 of 4: out of memory; continuing with --c``; after a failure it does not retry, one
line saying so. Its exit status is the last attempt's (``128 + n`` for a child killed by signal
``n``, as a shell reports it).

On a cluster the runner gets ``--retries 0`` (each attempt is a batch job that the main
Snakemake resubmits) and ``--marker fold_k/no_retry.json`` (``cluster.no_retry``): a failure a
retry cannot help leaves the marker, and the next attempt's runner exits at once with its status
and line.

Signals, kept simple on purpose:

* the command runs in a process group of its own; SIGINT, SIGTERM and the stop signal
  (``$NNUNET_STOP_SIGNAL``, SIGUSR1) that reach the runner are forwarded to that whole group
  (the trainer, its DDP ranks and data workers), and the runner waits for the command to end;
* SIGINT or SIGTERM to the runner is the user's stop (or the scheduler's): the runner never starts
  another attempt after it, and exits with the command's status;
* the stop signal is the walltime warning, the launcher/relay role of ``cluster.stop_signal``:
  forwarded, never fatal to the runner itself. The command starts with the stop signal ignored
  (as the rule's shell would have passed it on), so a warning that comes before the trainer set
  its handler is not fatal to it either.

The runner never escalates to SIGKILL and sets no timeouts; how fast a stopped fold ends is the
trainer's business. Only a SIGKILL of the runner itself reaches the command (Linux: the parent
death signal), as a SIGKILL too: nothing outlives the runner.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import signal
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from nnunet_core.cluster import no_retry, stop_signal
from nnunet_core.cluster.exit_codes import describe, is_retryable
from nnunet_core.errors import NnunetCoreError

PROG = "python -m nnunet_core.cluster.retry"
LINE_PREFIX = "retry: "  # the runner's own lines in the job's log (status reads past them)
USER_STOPS = (signal.SIGINT, signal.SIGTERM)
TAIL_BYTES = 16384  # how much of the job's log the marker's line is looked for in


def command_prefix(retries: int, marker: str | os.PathLike | None = None) -> str:
    """What the train rule's shell puts before the fold's command to run it through this runner
    (``python``: the job's PATH starts with the workflow's interpreter, as for every command)."""
    words = ["python", "-m", "nnunet_core.cluster.retry", "--retries", str(int(retries))]
    if marker is not None:
        words += ["--marker", str(marker)]
    return shlex.join(words) + " -- "


def exit_status(returncode: int) -> int:
    """A ``subprocess`` return code as a shell reports it (``-9`` -> ``137``)."""
    return 128 - returncode if returncode < 0 else returncode


PR_SET_PDEATHSIG = 1  # prctl(2)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _child_setup() -> None:
    """In the child, before exec: a process group of its own, the stop signal ignored, and
    (Linux) killed when the runner dies: a SIGKILL to the job's process group, which no longer
    reaches the command's group, still ends it."""
    os.setpgid(0, 0)
    stop_signal.ignore()
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


class Runner:
    """Runs the command's attempts; remembers whether the user stopped it."""

    def __init__(self, command: Sequence[str], retries: int, marker: Path | None) -> None:
        self.command = list(command)
        self.attempts = retries + 1
        self.marker = marker
        self.stopped_by_user = False
        self.child: subprocess.Popen[bytes] | None = None

    def _group(self) -> list[int]:
        """The child's process group, as ``os.kill`` takes it (a negative id), while it runs."""
        child = self.child
        return [-child.pid] if child is not None and child.returncode is None else []

    def _user_stop(self, signum: int, _frame: object) -> None:
        self.stopped_by_user = True
        for group in self._group():
            try:
                os.kill(group, signum)
            except ProcessLookupError:
                pass  # already gone

    def run(self) -> int:
        if self.marker is not None and (found := no_retry.read_marker(self.marker)) is not None:
            say(
                f"not run: an earlier attempt failed in a way a retry cannot help "
                f"(exit {found.exit_status}): {found.line} [{self.marker}; the next run of the "
                "workflow removes it]"
            )
            return found.exit_status
        for number in USER_STOPS:
            signal.signal(number, self._user_stop)
        stop_signal.forward(self._group)
        code = 0
        for attempt in range(1, self.attempts + 1):
            if attempt > 1:
                say(f"attempt {attempt} of {self.attempts}: {describe(code)}; continuing with --c")
            code = self._attempt()
            if code == 0 or self.stopped_by_user:
                break
            if not is_retryable(code):
                say(f"exit {code} ({describe(code)}): a retry cannot help, not retried")
                break
            if attempt == self.attempts:
                say(f"exit {code} ({describe(code)}): no retries left ({self.attempts - 1})")
        if self.marker is not None and not self.stopped_by_user and no_retry.marks(code):
            no_retry.write_marker(self.marker, code, last_error_line(describe(code)))
        return code

    def _attempt(self) -> int:
        self.child = subprocess.Popen(self.command, preexec_fn=_child_setup)
        if self.stopped_by_user:  # a stop that came while the child was being started
            self._user_stop(signal.SIGTERM, None)
        return exit_status(self.child.wait())  # resumes after each handled signal (PEP 475)


def say(line: str) -> None:
    print(f"{LINE_PREFIX}{line}", file=sys.stderr, flush=True)


def last_error_line(default: str) -> str:
    """The last ``error:`` line the command wrote to the job's log (this process's stderr, where
    it is a file: the train rule appends both streams to the log), else ``default``."""
    try:
        if not stat.S_ISREG(os.fstat(2).st_mode):
            return default  # a terminal or a pipe: nothing to read back
        with open("/proc/self/fd/2", "rb") as log:  # Linux; elsewhere: the default
            size = log.seek(0, os.SEEK_END)
            log.seek(max(0, size - TAIL_BYTES))
            tail = log.read().decode("utf-8", errors="replace")
    except OSError:
        return default
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    errors = [line for line in lines if ": error: " in line and not line.startswith(LINE_PREFIX)]
    return errors[-1] if errors else default


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--retries", type=int, default=0, help="further attempts, at most")
    parser.add_argument("--marker", type=Path, help="the fold's no_retry marker (on a cluster)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command given after --")
    if args.retries < 0:
        parser.error(f"--retries {args.retries}: must be 0 or more")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        return Runner(args.command, args.retries, args.marker).run()
    except FileNotFoundError:
        say(f"command not found: {args.command[0]}")
        return 127
    except NnunetCoreError as exc:  # e.g. an unknown $NNUNET_STOP_SIGNAL: one line
        say(f"error: {exc}")
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
