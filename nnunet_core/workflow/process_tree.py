"""The processes below a pid, read from /proc, named by (pid, start time) so a reused pid is
never signalled by mistake.

A local Snakemake runs each job's shell as its own child, in Snakemake's own process group (so no
group can be signalled without Snakemake and its caller); what the job starts (a retry runner,
the trainer, its data workers, DDP ranks) hangs below that shell. Once a parent dies its
children move to init, so whoever ends a job's processes keeps every process it has seen
(``Tracked``), not only those still below the job.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
_GONE_STATES = {"Z", "X", "x"}  # a zombie waits for its parent's wait(): it runs nothing


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    start: int  # clock ticks after boot (field 22 of /proc/PID/stat)
    state: str


def read(pid: int, proc: Path = PROC) -> ProcessInfo | None:
    """``/proc/PID/stat`` of one process, or None once it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it
    fields = stat[stat.rindex(")") + 2 :].split()
    return ProcessInfo(pid, int(fields[1]), int(fields[19]), fields[0])


def table(proc: Path = PROC) -> dict[int, ProcessInfo]:
    """Every process this user can read."""
    found = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            info = read(int(entry.name), proc)
            if info is not None:
                found[info.pid] = info
    return found


def descendants(root: int, proc: Path = PROC) -> list[ProcessInfo]:
    """Every live process below ``root`` (children first, then theirs)."""
    children: dict[int, list[ProcessInfo]] = {}
    for info in table(proc).values():
        children.setdefault(info.ppid, []).append(info)
    found, queue = [], [root]
    while queue:
        for info in children.get(queue.pop(0), []):
            if info.state not in _GONE_STATES:
                found.append(info)
            queue.append(info.pid)
    return found


def alive(info: ProcessInfo, proc: Path = PROC) -> bool:
    """The same process (pid and start time) still runs."""
    now = read(info.pid, proc)
    return now is not None and now.start == info.start and now.state not in _GONE_STATES


def send(info: ProcessInfo, signum: int, proc: Path = PROC) -> bool:
    """Send ``signum`` if the process still is the one seen; False if it is gone."""
    if not alive(info, proc):
        return False
    try:
        os.kill(info.pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@dataclass
class Tracked:
    """The processes seen below ``root`` so far, and which signals each has been sent."""

    root: int
    seen: dict[int, ProcessInfo] = field(default_factory=dict)
    sent: dict[int, set[int]] = field(default_factory=dict)

    def refresh(self) -> list[ProcessInfo]:
        """Add the processes now below ``root``; returns those seen for the first time."""
        new = []
        for info in descendants(self.root):
            known = self.seen.get(info.pid)
            if known is None or known.start != info.start:
                self.seen[info.pid] = info
                self.sent[info.pid] = set()
                new.append(info)
        return new

    def living(self) -> list[ProcessInfo]:
        return [info for info in self.seen.values() if alive(info)]

    def signal_all(self, signum: int, once: bool = True) -> int:
        """``signum`` to every living tracked process (each once, unless ``once`` is False);
        returns how many were sent it."""
        count = 0
        for info in self.living():
            if once and signum in self.sent[info.pid]:
                continue
            if send(info, signum):
                self.sent[info.pid].add(signum)
                count += 1
        return count


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
