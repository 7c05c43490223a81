"""Running the workflow as a user does (the real ``snakemake`` CLI), watching it, killing it.

``Watcher`` reads Snakemake's output line by line and tails the logs of training and prediction
jobs, so that each job's window (and the phases inside it) is timed; ``run_workflow`` sends
SIGKILL to the whole process group at a moment, as a node failure would.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from snakemake.utils import update_config

from benchmarks.faults.scenario import REPO, scenario_config
from benchmarks.faults.stages import BETWEEN_JOBS, JOB_PHASES, Anchor, Job
from nnunet_core.report.runtimes import JOB_MESSAGE

_JOB_LINE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_JOBID = re.compile(r"^\s+jobid: (\d+)\s*$")
_LOG = re.compile(r"^\s+log: (.+?)\s*$")
_FINISHED = re.compile(r"Finished jobid: (\d+) \(Rule: (\w+)\)")
_ERROR = re.compile(r"^Error in rule (\w+):")
LOCKED = "Directory cannot be locked"


def has_stale_lock(rundir: Path) -> bool:
    """Whether ``rundir/.snakemake/locks`` holds a lock file (``<n>.input.lock``, Snakemake's
    default file backend). The campaign runs one Snakemake at a time there, so only a killed one
    leaves it (a run that ends removes the folder), and it names the files of the same command's
    DAG: that command would stop with LOCKED until ``--unlock`` (Snakemake's advice) removes it."""
    locks = rundir / ".snakemake" / "locks"
    return locks.is_dir() and any(locks.glob("*.lock"))


def campaign_config(work: Path, changes: dict | None = None) -> dict:
    """The scenario ``ensemble_wins`` on the ``demo`` scenario, with ``changes`` (config keys,
    merged as ``--config`` does). Deterministic, seed 1, folds 0 and 1 of 2 epochs x 2
    iterations with a checkpoint each epoch (the smallest schedule with an epoch boundary), in
    which the pair ensemble of 2d and 3d_fullres wins the selection: every rule of the workflow
    runs, ``ensemble_predictions`` included."""
    config = scenario_config("demo", "ensemble_wins")
    config["work_dir"] = str(work)
    update_config(config, changes or {})
    return config


def snakemake_command(rundir: Path, repo: Path = REPO, *extra: str) -> list[str]:
    """The user's command (as tests/helpers/workflow.py `snakemake` runs it)."""
    return [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile",
        str(repo / "Snakefile"),
        "--directory",
        str(rundir),
        "--configfile",
        str(rundir / "config.yaml"),
        "--cores",
        "2",
        "all",
        *extra,
    ]


class Watcher:
    """Parses Snakemake's output as it comes and tails training logs; times are seconds since
    the start of the run on this process's monotonic clock."""

    def __init__(self, rundir: Path, t0: float) -> None:
        self.rundir = rundir
        self.t0 = t0
        self.lock = threading.Lock()
        self.jobs: list[Job] = []
        self.running: dict[str, Job] = {}
        self.events: list[tuple[float, str, Job]] = []
        self.lines: list[str] = []
        self._pending: Job | None = None
        self._log_offsets: dict[str, int] = {}
        self._log_inodes: dict[str, int | None] = {}
        self._log_tails: dict[str, str] = {}

    def now(self) -> float:
        return time.monotonic() - self.t0

    def feed(self, line: str) -> None:
        t = self.now()
        with self.lock:
            self.lines.append(line)
            if message := JOB_MESSAGE.match(line):  # a live run's one line per job
                job = Job(rule=message.group(2), jobid=message.group(1), log="", start=t)
                job.log = self._relative(message.group(4) or "")
                self._register(job)
                return
            match = _JOB_LINE.match(line)
            if match:
                self._pending = Job(rule=match.group(1), jobid="", log="", start=t)
                return
            pending = self._pending
            if pending is not None:
                if m := _LOG.match(line):
                    pending.log = self._relative(m.group(1))
                    return
                if m := _JOBID.match(line):
                    pending.jobid = m.group(1)
                    return
                if line.startswith((" ", "\t")) and line.strip():
                    return  # another key of the job block
                self._register(pending)
                self._pending = None
            if m := _FINISHED.search(line):
                job = self.running.pop(m.group(1), None)
                if job is not None:
                    job.end = t
                    self.events.append((t, "finish", job))
            elif m := _ERROR.match(line):
                for job in self.running.values():
                    if job.rule == m.group(1):
                        job.failed = True

    def _relative(self, logs: str) -> str:
        """A job's (first) log, relative to the run's folder where it lies inside."""
        log = logs.split(", ")[0]
        if not log:
            return ""
        try:
            return str(Path(log).resolve().relative_to(self.rundir))
        except ValueError:
            return log

    def _register(self, job: Job) -> None:
        self.jobs.append(job)
        self.running[job.jobid] = job
        self.events.append((job.start, "start", job))
        if job.rule in JOB_PHASES and job.log:
            # A log of an earlier attempt is skipped: Snakemake deletes it before the job runs
            # (a new file, or a shorter one, starts from 0 in poll_logs).
            path = self.rundir / job.log
            stat = path.stat() if path.is_file() else None
            self._log_offsets[job.jobid] = stat.st_size if stat else 0
            self._log_inodes[job.jobid] = stat.st_ino if stat else None
            self._log_tails[job.jobid] = ""

    def poll_logs(self) -> None:
        """Look for the phase markers in the logs of running jobs (JOB_PHASES)."""
        with self.lock:
            jobs = [
                j for j in self.running.values() if len(j.markers) < len(JOB_PHASES.get(j.rule, ()))
            ]
        for job in jobs:
            path = self.rundir / job.log
            offset = self._log_offsets.get(job.jobid, 0)
            try:
                with open(path, "rb") as handle:
                    stat = os.fstat(handle.fileno())
                    if stat.st_ino != self._log_inodes.get(job.jobid) or stat.st_size < offset:
                        offset, self._log_inodes[job.jobid] = 0, stat.st_ino
                        self._log_tails[job.jobid] = ""
                    handle.seek(offset)
                    data = handle.read()
            except OSError:
                continue
            t = self.now()
            self._log_offsets[job.jobid] = offset + len(data)
            text = self._log_tails[job.jobid] + data.decode("utf-8", "replace")
            self._log_tails[job.jobid] = text[-200:]
            for phase, pattern in JOB_PHASES[job.rule]:
                if phase not in job.markers and pattern.search(text):
                    with self.lock:
                        job.markers[phase] = t
                        self.events.append((t, f"marker:{phase}", job))

    def first(self, anchor: Anchor) -> float | None:
        if anchor.kind == "begin":
            return 0.0
        with self.lock:
            for t, kind, job in self.events:
                if kind != anchor.kind or job.rule != anchor.rule:
                    continue
                if anchor.key is None or job.key == anchor.key:
                    return t
        return None

    def running_stages(self) -> list[str]:
        t = self.now()
        with self.lock:
            stages = sorted({job.stage_at(t) for job in self.running.values()})
        stages = [s for s in stages if s != BETWEEN_JOBS]  # `all` is Snakemake's own
        return stages or [BETWEEN_JOBS]

    def running_jobs(self) -> list[str]:
        with self.lock:
            return sorted(job.key for job in self.running.values())

    def output(self) -> str:
        with self.lock:
            return "".join(self.lines)


@dataclass
class RunResult:
    returncode: int
    seconds: float
    output: str
    jobs: list[Job]
    killed_at: float | None = None
    stages_hit: list[str] = field(default_factory=list)
    jobs_hit: list[str] = field(default_factory=list)
    escaped: list[str] = field(default_factory=list)


def session_processes(sid: int) -> dict[int, str]:
    """Live (not zombie) processes of session ``sid``: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] == "Z" or int(fields[3]) != sid:
                continue
            found[pid] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, ValueError, IndexError):
            continue
    return found


def run_workflow(
    rundir: Path,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    kill: tuple[Anchor, float] | None = None,
    timeout: float = 1800.0,
) -> RunResult:
    """Run ``command``; with ``kill=(anchor, offset)`` SIGKILL its process group ``offset``
    seconds after ``anchor`` is seen (the run goes on to its end if the anchor never comes)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=rundir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    watcher = Watcher(rundir.resolve(), t0)
    reader = threading.Thread(
        target=lambda: [watcher.feed(line) for line in proc.stdout], daemon=True
    )
    reader.start()
    result = RunResult(returncode=0, seconds=0.0, output="", jobs=[])
    try:
        while proc.poll() is None:
            watcher.poll_logs()
            if kill is not None and result.killed_at is None:
                anchor, offset = kill
                seen = watcher.first(anchor)
                if seen is not None and watcher.now() >= seen + offset:
                    result.stages_hit = watcher.running_stages()
                    result.jobs_hit = watcher.running_jobs()
                    result.killed_at = watcher.now()
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
            if watcher.now() > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
        proc.wait()
        if result.killed_at is not None:
            # Whatever left the process group (setsid, setpgid) is still running: name it,
            # then kill it as the node failure would have.
            # (A process still exiting after the SIGKILL has an empty command line: not one.)
            time.sleep(0.3)
            for _ in range(50):
                survivors = session_processes(proc.pid)
                if not survivors:
                    break
                for pid, cmdline in survivors.items():
                    if cmdline and cmdline not in result.escaped:
                        result.escaped.append(cmdline)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                time.sleep(0.1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=10)
    watcher.poll_logs()
    result.returncode = proc.returncode
    result.seconds = time.monotonic() - t0
    result.output = watcher.output()
    result.jobs = list(watcher.jobs)
    return result


def failed_job_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if _ERROR.match(line)]
