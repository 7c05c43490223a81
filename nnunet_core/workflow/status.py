"""Where a workflow run stands, read from its files: each fold's phase (training: epoch i/N;
final validation: case i/N with its ETA, ``(with npz)`` when it writes probabilities; the
metrics), pseudo Dice and state (running, continuing, stopped, failed, done; a fold whose
training an earlier attempt did says so), each prediction job's case i/N.

Only files in ``work_dir`` are read (the jobs' logs under ``logs/``, each fold's
``provenance.json`` and ``.training.lock``), so it answers the same while the workflow runs or
after, locally or for jobs on cluster nodes. A log line this module does not know is skipped, so
lines with more fields (e.g. an epoch line with its data-wait seconds) still parse.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.cluster.retry import LINE_PREFIX as RETRY_LINE_PREFIX
from nnunet_core.layout.results import FOLD_LOCK_NAME, fold_dir
from nnunet_core.layout.work import PREDICT_LOG, TRAIN_LOG, WORK_LOGS, WORK_RESULTS
from nnunet_core.workflow.fold_phase import reused_detail, validation_phase, writes_npz

# provenance.json and its attempt states (nnunet_core.training.fold.provenance, which loads torch).
PROVENANCE_NAME = "provenance.json"
RUNNING, DONE, STOPPED, CONTINUING = "running", "done", "stopped", "continuing"
FAILED, INTERRUPTED, NOT_RUNNING = "failed", "interrupted", "not running"

_TRAIN_LOG = re.compile(
    "^"
    + re.escape(TRAIN_LOG).replace(r"\{configuration\}", "(.+)").replace(r"\{fold\}", "(.+)")
    + "$"
)
_PREDICT_LOG = re.compile("^" + re.escape(PREDICT_LOG).replace(r"\{configuration\}", "(.+)") + "$")
_EPOCH = re.compile(r"\bepoch (\d+)/(\d+): ")
_ETA = re.compile(r"; ETA (\d+:\d\d:\d\d(?: \(about [^)]*\))?)")
_PSEUDO_DICE = re.compile(r": Pseudo dice (\[.*\])")
_STOPPED = re.compile(r"fold \S+: (stopped at epoch \d+ by [^;]+)")
_CONTINUED = re.compile(r": continuing from ")
_RESUMED_AT = re.compile(r": continuing from .+ at epoch (\d+)$")
_FRESH = re.compile(r": no checkpoint in .+ to continue from; starting")
_SCHEDULE = re.compile(r" parameters; (\d+) epochs x \d+ iterations")
_ATTEMPT_START = re.compile(r"starting fresh|starting from the pretrained|continuing from ")
_FOLD_DONE = re.compile(r": Mean Validation Dice: ")
_ERROR = re.compile(r"^nnunet-core \S+: error: |^[\w.]*(Error|Exception)\b.*: ")
_INTERRUPTED = re.compile(r"^nnunet-core \S+: interrupted")
_CASE = re.compile(r"^predict: case (\d+)/(\d+) ")
_PREDICT_DONE = re.compile(r"^wrote \d+ prediction\(s\) to ")


@dataclass
class JobStatus:
    """One job's line: what it is, how far it got, its state and a detail (reason, last line)."""

    job: str
    log: Path
    progress: str = ""
    eta: str = ""
    pseudo_dice: str = ""
    state: str = RUNNING
    detail: str = ""

    def line(self) -> str:
        parts = [self.job, self.progress, self.state]
        if self.eta and self.state in (RUNNING, CONTINUING):
            parts.append(f"ETA {self.eta}")
        if self.pseudo_dice:
            parts.append(f"pseudo Dice {self.pseudo_dice}")
        if self.detail:
            parts.append(self.detail)
        return "  ".join(p for p in parts if p)


def _lines(log: Path) -> list[str]:
    return [line.rstrip() for line in log.read_text(errors="replace").splitlines() if line.strip()]


def _age(path: Path) -> str:
    seconds = max(0, int(time.time() - path.stat().st_mtime))
    return f"log written {seconds // 60} min {seconds % 60} s ago"


def fold_state(lines: list[str]) -> tuple[str, str]:
    """(state, detail) from a fold job's log (every attempt appends to it)."""
    state, detail, stop = RUNNING, "", ""
    for line in lines:
        if _ATTEMPT_START.search(line):
            state = CONTINUING if stop or _CONTINUED.search(line) else RUNNING
            detail = f"after {stop}" if stop else ""
        elif match := _STOPPED.search(line):
            stop = match.group(1)
            # the user's stop (cluster.user_stop) is never retried; a walltime stop may be
            retry = "" if " by the user" in stop else " (so does its retry, if one is left)"
            state, detail = (
                STOPPED,
                f"{stop}; the same command continues it from its checkpoint{retry}",
            )
        elif _FOLD_DONE.search(line):
            state, detail = DONE, ""
        elif _INTERRUPTED.search(line):
            state, detail = INTERRUPTED, line
        elif _ERROR.search(line):
            state, detail = FAILED, line
    return state, detail


def _holder_alive(fold: Path) -> bool | None:
    """Whether the process in the fold's lock file lives: None when it cannot be told here
    (no lock file, or held from another host)."""
    try:
        holder = (fold / FOLD_LOCK_NAME).read_text().split()
    except OSError:
        return None
    if len(holder) != 4 or holder[0] != "pid" or holder[2] != "on":
        return None
    if holder[3] != socket.gethostname():
        return None
    try:
        os.kill(int(holder[1]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError):
        return True
    return True


def _record(fold: Path) -> dict:
    """The fold's provenance.json ({} when none or unreadable)."""
    try:
        record = json.loads((fold / PROVENANCE_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _attempts(fold: Path) -> list[dict]:
    """The attempts recorded in the fold's provenance.json ([] when none)."""
    attempts = _record(fold).get("attempts")
    return [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []


def _recorded_state(status: JobStatus, lines: list[str], folds: list[Path]) -> None:
    """A job whose log says it runs: what its fold folder says (a retry after a stop continues;
    an attempt recorded as failed failed; a holder process gone ended without a word)."""
    attempts = [_attempts(f) for f in folds]
    last = [a[-1].get("status") for a in attempts if a]
    # The lock names this job's process only once the job has taken it, which it does before
    # its first line about where it starts; before that it and provenance.json tell of the
    # previous attempt.
    started = any(_ATTEMPT_START.search(line) for line in lines)
    # the fold's own last line, not the retry runner's verdict on it (cluster.retry)
    own = [line for line in lines if not line.startswith(RETRY_LINE_PREFIX)] or lines
    if started and FAILED in last:
        status.state, status.detail = FAILED, own[-1]
        return
    if started and (any(_holder_alive(f) is False for f in folds) or INTERRUPTED in last):
        status.state = NOT_RUNNING
        last_line = own[-1] if own else "(empty log)"
        status.detail = f"the job ended without a word (killed?); last line: {last_line}"
        return
    for record in attempts if started else []:
        if len(record) > 1 and record[-1].get("status") == RUNNING:
            before = record[-2]
            status.state = CONTINUING
            status.detail = (
                f"attempt {len(record)}, after attempt {len(record) - 1} "
                f"{before.get('status')} after {before.get('end_epoch')} epoch(s)"
            )
    if not started:
        status.detail = "starting"
    status.detail = "; ".join(p for p in (status.detail, _age(status.log)) if p)


def fold_status(log: Path, configuration: str, fold: str, results: Path) -> JobStatus:
    """A fold job's status from its log (after the kept logs of its earlier attempts, if any),
    and its fold folder(s) under ``results``."""
    own = _lines(log)
    lines = [line for kept in earlier_logs(log) for line in _lines(kept)] + own
    status = JobStatus(f"train {configuration} fold {fold}", log=log)
    done = 0  # epochs finished before this attempt's first epoch line
    for line in lines:
        if match := _EPOCH.search(line):
            status.progress = f"epoch {match.group(1)}/{match.group(2)}"
            eta = _ETA.search(line)
            status.eta = eta.group(1) if eta else ""
        elif match := _PSEUDO_DICE.search(line):
            status.pseudo_dice = match.group(1)
        elif match := _RESUMED_AT.search(line):
            done, status.eta = int(match.group(1)), ""  # the earlier attempt's ETA is stale
        elif match := _SCHEDULE.search(line):  # an attempt's first epoch is under way
            status.progress, status.eta = f"epoch {done}/{match.group(1)}", ""
        elif _FRESH.search(line):
            done, status.eta = 0, ""
    status.state, status.detail = fold_state(lines)
    # a new attempt whose log has no line yet about where it starts: the kept logs' last state
    # (failed, stopped) is the previous attempt's
    starting = len(lines) > len(own) and not any(_ATTEMPT_START.search(x) for x in own)
    if starting and fold_state(own)[0] == RUNNING:
        status.state, status.detail, status.eta = RUNNING, "", ""
    folders = [f for f in results.glob(f"*__{configuration}") if f.is_dir()]
    folds = [fold_dir(f, fold) for f in folders if fold_dir(f, fold).is_dir()]
    record = _latest_record(folds)
    attempts = [a for a in record.get("attempts") or [] if isinstance(a, dict)]
    current = own if starting else current_attempt(lines)
    phase = None if status.state == DONE else validation_phase(current, writes_npz(record))
    if phase is not None:
        status.progress, status.eta = phase
    if status.state in (RUNNING, CONTINUING):
        _recorded_state(status, own, folds)
    reused = reused_detail(current, attempts)
    status.detail = "; ".join(p for p in (reused, status.detail) if p)
    return status


def earlier_logs(log: Path) -> list[Path]:
    """The logs of a job's earlier attempts that a rerun kept aside (``<log>.1``, ``.2``, ...:
    ``workflow.log_rotation``), oldest first."""
    kept = re.compile(re.escape(log.name) + r"\.(\d+)$")
    found = [(int(m.group(1)), p) for p in log.parent.iterdir() if (m := kept.match(p.name))]
    return [path for _, path in sorted(found)]


def current_attempt(lines: list[str]) -> list[str]:
    """The lines of the log's last attempt (from its line saying where it starts), else all."""
    starts = [i for i, line in enumerate(lines) if _ATTEMPT_START.search(line)]
    return lines[starts[-1] :] if starts else lines


def _latest_record(folds: list[Path]) -> dict:
    """The provenance of the fold folder written last (results may hold several trainers' or
    plans' folders of this configuration and fold); {} when none has one."""
    recorded = [f for f in folds if (f / PROVENANCE_NAME).is_file()]
    if not recorded:
        return {}
    return _record(max(recorded, key=lambda f: (f / PROVENANCE_NAME).stat().st_mtime))


def prediction_status(log: Path, configuration: str) -> JobStatus:
    """A prediction job's status from its log: case i/N, ETA, done or failed."""
    lines = _lines(log)
    status = JobStatus(f"predict {configuration}", log=log)
    for line in lines:
        if match := _CASE.search(line):
            status.progress = f"case {match.group(1)}/{match.group(2)}"
            eta = _ETA.search(line)
            status.eta = eta.group(1) if eta else ""
        elif _PREDICT_DONE.search(line):
            status.state, status.detail = DONE, ""
        elif _ERROR.search(line) or _INTERRUPTED.search(line):
            status.state = FAILED if _ERROR.search(line) else INTERRUPTED
            status.detail = line
    if status.state == RUNNING:
        status.detail = _age(log)
    return status


def run_status(logs: Path, results: Path) -> list[JobStatus]:
    """Every fold and prediction job that has a log in ``logs`` (one dataset, one seed)."""
    found: list[JobStatus] = []
    for log in sorted(logs.iterdir()):
        if match := _TRAIN_LOG.match(log.name):
            found.append(fold_status(log, match.group(1), match.group(2), results))
    for log in sorted(logs.iterdir()):
        if match := _PREDICT_LOG.match(log.name):
            found.append(prediction_status(log, match.group(1)))
    return found


def work_status(work_dir: str | os.PathLike) -> dict[str, list[JobStatus]]:
    """``{run: jobs}`` for every run under ``work_dir/logs`` (``Dataset`` or
    ``seed_<n>/Dataset``), runs without fold or prediction logs left out."""
    work = Path(work_dir)
    logs_root = work / WORK_LOGS
    runs: dict[str, list[JobStatus]] = {}
    for logs in sorted({p.parent for p in logs_root.rglob("*.log")}):
        relative = logs.relative_to(logs_root)
        jobs = run_status(logs, work / WORK_RESULTS / relative)
        if jobs:
            runs[str(relative)] = jobs
    return runs
