"""A node of a multi-node fold: run its torchrun agent so that the stop signal reaches trainers.

``python -m nnunet_core.cluster.stop_relay torchrun ...`` is what ``srun`` starts on every node.

SLURM's warning before the walltime (the stop signal, SIGUSR1 unless ``$NNUNET_STOP_SIGNAL``
says otherwise: ``nnunet_core.cluster.stop_signal``) goes to the processes of the job step. Two
things go wrong with a bare ``srun torchrun``:

* the torchrun agent has no handler for the signal, so it dies of it, and with it the step;
* the agent starts its workers in sessions of their own, so where the step is tracked by
  process group (``proctrack/pgid``) the workers never see the signal at all.

This relay runs the agent with the signal ignored and, when the signal arrives, sends it to the
agent's children only (the relay role of ``nnunet_core.cluster.stop_signal``): the trainers,
which stop at the next epoch boundary with a checkpoint. (Upstream's shell recipe is
``trap 'pkill -USR1 -P $TORCHRUN_PID' USR1``. Never ``pkill -f``: the agent's own command line
names the same script.) SIGTERM and SIGINT are passed on to the agent, which ends its workers.
The exit status is the agent's.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from nnunet_core.cluster import stop_signal

USAGE = "usage: python -m nnunet_core.cluster.stop_relay [--] COMMAND [ARGS...]"


def children_of(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc; processes that vanish are skipped)."""
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def run(command: Sequence[str]) -> int:
    """Start ``command`` (the agent), relay signals to it as described above, return its status."""
    # stop_signal.ignore runs in the child between fork and exec: the agent ignores the signal
    agent = subprocess.Popen(list(command), preexec_fn=stop_signal.ignore)

    def to_agent(signum: int, _frame: object) -> None:
        agent.send_signal(signum)  # a no-op once the agent has ended

    stop_signal.forward(lambda: children_of(agent.pid))
    signal.signal(signal.SIGTERM, to_agent)
    signal.signal(signal.SIGINT, to_agent)
    status = agent.wait()  # resumes by itself after each handled signal (PEP 475)
    return 128 - status if status < 0 else status


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if args else 2
    try:
        return run(args)
    except FileNotFoundError:
        print(f"stop_relay: command not found: {args[0]}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
