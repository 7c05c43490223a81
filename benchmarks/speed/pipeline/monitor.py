"""Wall time, CPU seconds and peak memory of process trees, sampled from /proc (Linux).

The pipeline benchmark runs whole command chains (Snakemake and its jobs, upstream's CLI with
its worker pools), so a process's own rusage is not enough: memory is the summed RSS of every
live descendant, sampled on a thread, and CPU seconds are exact for a whole command (the
RUSAGE_CHILDREN delta once it has been waited for) and sampled per job inside it. A job is the
process at a fixed depth below the monitored root (Snakemake's shell of a rule; one command of
a chain), labelled by a function of its argv.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MB = 2**20


@dataclass(frozen=True)
class ProcInfo:
    """One process as /proc shows it: parent, resident memory, CPU of itself and of its reaped
    children (seconds), and its argv."""

    ppid: int
    rss: int
    cpu: float
    children_cpu: float
    argv: tuple[str, ...]


def read_process(pid: int) -> ProcInfo | None:
    """``/proc/<pid>``, or None when it has gone (processes end while we read)."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
        statm = (base / "statm").read_text()
        argv = (base / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    # The command name in parentheses may hold spaces: split after its closing parenthesis.
    fields = stat.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return ProcInfo(
        ppid=int(fields[1]),
        rss=int(statm.split()[1]) * PAGE_BYTES,
        cpu=(utime + stime) / CLOCK_TICKS,
        children_cpu=(cutime + cstime) / CLOCK_TICKS,
        argv=tuple(a.decode(errors="replace") for a in argv if a),
    )


def process_table() -> dict[int, ProcInfo]:
    """Every process we can read, by pid."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = read_process(int(entry))
            if info is not None:
                table[int(entry)] = info
    return table


def descendants(table: dict[int, ProcInfo], root: int) -> dict[int, int]:
    """pid -> depth below ``root`` (1: a child) of every live descendant of ``root``."""
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    depth = {root: 0}
    queue = [root]
    while queue:
        parent = queue.pop()
        for child in children.get(parent, []):
            if child not in depth:
                depth[child] = depth[parent] + 1
                queue.append(child)
    del depth[root]
    return depth


def job_root(table: dict[int, ProcInfo], pid: int, depth: dict[int, int], job_depth: int) -> int:
    """The ancestor of ``pid`` at ``job_depth`` below the root (``pid`` itself there)."""
    while depth.get(pid, 0) > job_depth:
        pid = table[pid].ppid
    return pid


@dataclass
class JobRecord:
    """What the samples saw of one job: first and last time alive, peak RSS of its subtree,
    and its CPU seconds (its subtree's own plus reaped children's, the largest sum seen)."""

    pid: int
    label: str
    argv: tuple[str, ...]
    start: float
    end: float
    peak_rss: int = 0
    cpu: float = 0.0
    cpu_exact: bool = False


@dataclass
class TreeSample:
    """One sample: time, summed RSS of the whole tree and per job label."""

    time: float
    rss: int
    rss_by_label: dict[str, int] = field(default_factory=dict)


class TreeSampler:
    """Samples the tree below ``root`` every ``interval`` seconds on a thread.

    Processes at depth ``job_depth`` start jobs (labelled by ``label(argv)``); shallower ones
    (Snakemake itself) count as ``overhead``. When exactly one job has been reaped since the
    last sample, the growth of its parent's reaped-children CPU is that job's exact CPU time.
    """

    def __init__(
        self,
        root: int,
        job_depth: int,
        label: Callable[[Sequence[str]], str],
        interval: float = 0.2,
    ) -> None:
        self.root, self.job_depth, self.label, self.interval = root, job_depth, label, interval
        self.jobs: dict[int, JobRecord] = {}
        self.samples: list[TreeSample] = []
        self.overhead_cpu = 0.0
        self._parent_of: dict[int, int] = {}
        self._parents_cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)
        self.sample()

    def sample(self) -> None:
        """Take one sample now (also called by the thread)."""
        now = time.time()
        table = process_table()
        depth = descendants(table, self.root)
        alive = self._record_jobs(table, depth, now)
        self._settle_reaped(table, depth, alive)
        self.samples.append(self._memory(table, depth, now))

    def _record_jobs(
        self, table: dict[int, ProcInfo], depth: dict[int, int], now: float
    ) -> set[int]:
        cpu_by_job: dict[int, float] = {}
        rss_by_job: dict[int, int] = {}
        for pid, level in depth.items():
            if level < self.job_depth:
                continue
            info = table[pid]
            job = job_root(table, pid, depth, self.job_depth)
            cpu_by_job[job] = cpu_by_job.get(job, 0.0) + info.cpu + info.children_cpu
            rss_by_job[job] = rss_by_job.get(job, 0) + info.rss
        for job, cpu in cpu_by_job.items():
            record = self.jobs.get(job)
            if record is None:
                argv = table[job].argv
                record = self.jobs[job] = JobRecord(job, self.label(argv), argv, now, now)
            elif record.label == "other":
                # A shell that exec'd its one command: the label may show only now.
                record.label = self.label(table[job].argv)
            record.end = now
            record.cpu = max(record.cpu, cpu)
            record.peak_rss = max(record.peak_rss, rss_by_job[job])
        return set(cpu_by_job)

    def _settle_reaped(
        self, table: dict[int, ProcInfo], depth: dict[int, int], alive: set[int]
    ) -> None:
        """Exact CPU of a job reaped alone since the last sample (its parent's reaped-children
        CPU grew by exactly that); the own CPU of the processes above the jobs (overhead)."""
        parents = {pid: table[pid] for pid, level in depth.items() if level < self.job_depth}
        if self.root in table:
            parents[self.root] = table[self.root]
        reaped: dict[int, list[int]] = {}
        for job, parent in self._parent_of.items():
            if job not in alive:
                reaped.setdefault(parent, []).append(job)
        for pid, info in parents.items():
            before = self._parents_cpu.get(pid)
            self._parents_cpu[pid] = info.children_cpu
            jobs = reaped.get(pid, [])
            if before is not None and len(jobs) == 1 and info.children_cpu > before:
                record = self.jobs[jobs[0]]
                record.cpu, record.cpu_exact = info.children_cpu - before, True
        own = sum(info.cpu for pid, info in parents.items() if pid != self.root)
        self.overhead_cpu = max(self.overhead_cpu, own)
        self._parent_of = {job: table[job].ppid for job in alive}

    def _memory(self, table: dict[int, ProcInfo], depth: dict[int, int], now: float):
        by_label: dict[str, int] = {}
        for pid, level in depth.items():
            if level < self.job_depth:
                by_label["overhead"] = by_label.get("overhead", 0) + table[pid].rss
                continue
            record = self.jobs.get(job_root(table, pid, depth, self.job_depth))
            label = record.label if record else "overhead"
            by_label[label] = by_label.get(label, 0) + table[pid].rss
        return TreeSample(now, sum(by_label.values()), by_label)

    def peak_rss(self, label: str | None = None) -> int:
        """Largest summed RSS over the samples: the whole tree, or the jobs of one label."""
        if label is None:
            return max((s.rss for s in self.samples), default=0)
        return max((s.rss_by_label.get(label, 0) for s in self.samples), default=0)


def children_cpu_seconds() -> float:
    """User + system seconds of every child this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class RunResult:
    """One monitored stretch: wall seconds, exact CPU seconds of its commands, peak tree RSS,
    and the exit codes."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncodes: list[int]


def run_parallel(
    commands: Sequence[Sequence[str]],
    parallel: int,
    log_dir: Path,
    env: dict[str, str] | None = None,
    sampler: TreeSampler | None = None,
) -> RunResult:
    """Run ``commands`` with at most ``parallel`` at a time (as `xargs -P` would), each logging
    to ``log_dir/<index>.log``; the peak comes from ``sampler`` (started by the caller, so that
    one sampler can watch a whole chain) when given."""
    log_dir.mkdir(parents=True, exist_ok=True)
    first_sample = len(sampler.samples) if sampler else 0
    cpu0, t0 = children_cpu_seconds(), time.perf_counter()
    pending = list(enumerate(commands))
    running: list[subprocess.Popen] = []
    codes: list[int] = []
    while pending or running:
        while pending and len(running) < max(1, parallel):
            index, command = pending.pop(0)
            with open(log_dir / f"{index}.log", "w") as log:
                running.append(
                    subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
                )
        time.sleep(0.05)
        for proc in [p for p in running if p.poll() is not None]:
            running.remove(proc)
            codes.append(proc.returncode)
    wall = time.perf_counter() - t0
    if sampler:
        sampler.sample()
    samples = sampler.samples[first_sample:] if sampler else []
    peak = max((s.rss for s in samples), default=0)
    return RunResult(wall, children_cpu_seconds() - cpu0, peak / MB, codes)
