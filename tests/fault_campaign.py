"""Fault campaign over the whole workflow: SIGKILL at chosen moments, rerun, compare.

How it works
------------
1. **Reference.** The real ``snakemake`` CLI runs the tiny scenario (``tiny_config``: 6 + 2 cases,
   2d and 3d_fullres, ``deterministic: true``, folds [0, 1], 2 epochs x 2 iterations, 1 validation
   iteration: every stage runs, and training has an epoch boundary to resume from) once,
   uninterrupted, in ``<base>/run``. Snakemake's output is read line by line as it comes; each
   job's window (its ``localrule X:`` line to its ``Finished jobid`` line) is timed with this
   process's clock, and a training job's log is tailed so that its window splits into
   ``training startup`` (imports, data, network), ``training`` (the epochs and their checkpoints,
   from the first "Epoch N" line) and ``npz export`` (validation: predicting the held-out cases
   and exporting their probabilities, from the trainer's "training finished after" line, written
   once checkpoint_final.pth is saved, to the job's end); a prediction job's into ``prediction``
   (model, input checks) and ``prediction writing`` (from its first case written: its output
   folder exists, incomplete, until the job ends). Gaps in which no job runs, and the
   startup before the first job, are the stage ``between jobs`` (Snakemake alone: DAG, lock,
   DAG updates after a checkpoint, metadata). The final tree is reduced to a manifest (below).
2. **Moments.** ``draw_moments(reference, n, seed)`` is stratified: the stages are shuffled
   (``random.Random(seed)``) and taken in turn, so n >= #stages gives every stage a moment; for
   each, one of the stage's windows (a job, a phase of a job, a gap) and an offset inside
   it (5-95 % of its reference length).
3. **Fault.** The same command starts in a fresh ``<base>/run`` (``start_new_session=True``). When
   the moment's anchor appears (the job's start line, the trainer's marker line, or the Finished
   line before a gap) the harness waits the offset, notes which jobs run (the stage hit), and
   sends SIGKILL to the whole process group (``os.killpg``): Snakemake, the job shells and every
   command they run die at once, as on a node failure. A process of that session that survived
   (one that left the group) is listed and killed too.
4. **Rerun.** The same command again. The workflow profile (profiles/default) sets
   ``rerun-incomplete: true``, so nothing more is needed for the outputs Snakemake marked
   incomplete. A SIGKILLed Snakemake leaves its lock in ``.snakemake/locks`` and the rerun stops
   with "Directory cannot be locked"; Snakemake's message tells the user to run the same command
   with ``--unlock``, which is what the harness then does (once, recorded as ``unlocked``) before
   rerunning. Nothing else is touched.
5. **Checks** after the rerun: exit status 0; no half-written file anywhere under the work folder
   (``half_written``: temporaries of ``nnunet_core.io.atomic`` (``.<name>.<random><suffix>``) or
   any other hidden file but Snakemake's ``.snakemake_timestamp`` and the work_dir lock
   ``logs/.workflow.lock``; ``*.partial``/``*.tmp``/``*.part`` names; zero-byte files that are not
   empty in the reference; JSON, NIfTI, npz, b2nd, pth, png, csv files that do not read in full)
   and the manifest equals the reference's (``compare_manifests``). Snakemake's markers of
   incomplete outputs left in ``.snakemake/incomplete`` are recorded (``stale_markers``), not
   counted as half-written: Snakemake (9.27) checks them only for the jobs of its first DAG, so a
   job after a checkpoint killed after its last output was written keeps its marker although the
   output is complete (the file checks above still read it).

What counts as identical
------------------------
Two uninterrupted runs in deterministic mode on the CPU give the same bytes for every file but the
ones below (checked by running the reference twice), so the manifest holds the SHA-256 of every
file's bytes (plans, fingerprint, splits, preprocessed b2nd arrays and case JSON, validation
npz/NIfTI/summaries, cross-validation and ensemble summaries, selection, test predictions,
postprocessed segmentations, test summary, report tables and figures), except:

- ``logs/**`` and ``fold_k/training_log_<start time>.txt``: logs (times, durations; a rerun
  appends to a log or starts a new one). Not compared at all.
- ``.snakemake_timestamp``: Snakemake's marker of a finished directory output. Not compared.
- ``fold_k/progress.png`` (plots epoch durations) and ``report/run_times.png`` with its PDF and
  SVG (plot job run times): compared only as "present" (and the PNGs as readable).
- ``fold_k/checkpoint_*.pth``: loaded (``weights_only=True``) and compared value by value, tensors
  by their bytes, without ``logging.epoch_start_timestamps``/``epoch_end_timestamps``.
- ``fold_k/provenance.json``: compared without ``attempts`` (host, pid, start/end of each attempt:
  a killed fold has more of them) and ``git`` (the checkout's commit and dirty flag at run time);
  the last attempt must say ``finished``.
- ``verify.json``: without ``training_files.sha256`` (it hashes the raw files' mtimes, which a
  rerun of the synthesize step renews).
- ``preprocess_summary.json``: without every ``seconds`` key (durations).

A file in only one of the two trees is a difference (``missing``/``extra``), but for the excluded
logs.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from workflow_helpers import REPO, tiny_config  # noqa: E402

# ------------------------------------------------------------------------------------ stages
STAGE_OF_RULE = {
    "synthesize_dataset": "synthesize",
    "verify_dataset": "verify",
    "fingerprint": "fingerprint",
    "plan": "plan",
    "splits": "splits",
    "preprocess": "preprocess",
    "train": "training startup",
    "crossval": "crossval",
    "ensemble_cv": "ensembles",
    "ensemble_predictions": "ensembles",
    "select": "selection",
    "predict": "prediction",
    "postprocess": "postprocessing",
    "evaluate_test": "test evaluation",
    "report": "report",
}
TRAINING = "training"
NPZ_EXPORT = "npz export"
PREDICTION_WRITING = "prediction writing"
BETWEEN_JOBS = "between jobs"
STAGE_ORDER = [
    "synthesize",
    "verify",
    "fingerprint",
    "plan",
    "splits",
    "preprocess",
    "training startup",
    TRAINING,
    NPZ_EXPORT,
    "crossval",
    "ensembles",
    "selection",
    "prediction",
    PREDICTION_WRITING,
    "postprocessing",
    "test evaluation",
    "report",
    BETWEEN_JOBS,
]
# Phases of a job after its start, each from a line of the job's log. Training ("training
# startup": imports, data, network): the epochs (and their checkpoints) from the first "Epoch N"
# line, the validation (npz export) from the line written once checkpoint_final.pth is saved.
# Prediction (model, input checks): writing the cases from the line of the first one written.
JOB_PHASES = {
    "train": (
        (TRAINING, re.compile(r": Epoch \d+$", re.M)),
        (NPZ_EXPORT, re.compile(r"training (finished after|already finished)")),
    ),
    "predict": ((PREDICTION_WRITING, re.compile(r"^predict: case 1/", re.M)),),
}

_JOB_LINE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):\s*$")
_JOBID = re.compile(r"^\s+jobid: (\d+)\s*$")
_LOG = re.compile(r"^\s+log: (.+?)\s*$")
_FINISHED = re.compile(r"Finished jobid: (\d+) \(Rule: (\w+)\)")
_ERROR = re.compile(r"^Error in rule (\w+):")
LOCKED = "Directory cannot be locked"


def campaign_config(work: Path, epochs: int = 2) -> dict:
    """The tiny scenario in deterministic mode, folds [0, 1], the smallest schedule with an
    epoch boundary (``epochs`` x 2 iterations, 1 validation iteration, a checkpoint each epoch)."""
    config = tiny_config(work)
    config["deterministic"] = True
    config["training"].update(
        folds=[0, 1],
        epochs=epochs,
        iterations_per_epoch=2,
        val_iterations_per_epoch=1,
        save_every=1,
    )
    return config


def snakemake_command(rundir: Path, repo: Path = REPO, *extra: str) -> list[str]:
    """The user's command (as tests/workflow_helpers.py `snakemake` runs it)."""
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


# ------------------------------------------------------------------------- watching a run
@dataclass
class Job:
    rule: str
    jobid: str
    log: str  # relative to the run folder; "" for rules without a log (all)
    start: float
    end: float | None = None
    markers: dict[str, float] = field(default_factory=dict)  # when each phase began
    failed: bool = False

    @property
    def key(self) -> str:
        return f"{self.rule}:{self.log}"

    def stage_at(self, t: float) -> str:
        stage = STAGE_OF_RULE.get(self.rule, BETWEEN_JOBS)
        for phase, began in self.markers.items():
            if t >= began:
                stage = phase
        return stage


@dataclass
class Anchor:
    """An event of a run: ``kind`` start|marker:<phase>|finish of a job with ``key`` (or, with
    ``key`` None, of the first job of ``rule``), or ``begin``: the start of the run."""

    kind: str
    rule: str
    key: str | None


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
            match = _JOB_LINE.match(line)
            if match:
                self._pending = Job(rule=match.group(1), jobid="", log="", start=t)
                return
            pending = self._pending
            if pending is not None:
                if m := _LOG.match(line):
                    log = m.group(1).split(", ")[0]
                    try:
                        pending.log = str(Path(log).resolve().relative_to(self.rundir))
                    except ValueError:
                        pending.log = log
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


# ------------------------------------------------------------------------------ the windows
@dataclass
class Window:
    stage: str
    anchor: Anchor
    start: float  # seconds since the start of the reference run
    length: float
    what: str  # the job (or the job before a gap)


def stage_windows(jobs: list[Job], total: float) -> list[Window]:
    """Every job's window (split in its phases, JOB_PHASES) and every gap."""
    windows = []
    for job in jobs:
        if job.rule not in STAGE_OF_RULE or job.end is None:
            continue
        # A job's phases: (stage, anchor, start); one but for the rules of JOB_PHASES.
        phases = [(STAGE_OF_RULE[job.rule], Anchor("start", job.rule, job.key), job.start)]
        for phase, began in sorted(job.markers.items(), key=lambda item: item[1]):
            phases.append((phase, Anchor(f"marker:{phase}", job.rule, job.key), began))
        ends = [began for _, _, began in phases[1:]] + [job.end]
        for (stage, anchor, began), end in zip(phases, ends, strict=True):
            windows.append(Window(stage, anchor, began, end - began, job.key))
    # Gaps: nobody runs from one job's end to the next start; before the first job Snakemake
    # builds the DAG (and takes its lock).
    busy = sorted((j.start, j.end or total, j) for j in jobs if j.rule in STAGE_OF_RULE)
    if busy:
        windows.append(Window(BETWEEN_JOBS, Anchor("begin", "", None), 0.0, busy[0][0], "startup"))
    reach, last = 0.0, None
    for start, end, job in busy:
        if last is not None and start - reach > 0.05:
            windows.append(
                Window(
                    BETWEEN_JOBS,
                    Anchor("finish", last.rule, last.key),
                    reach,
                    start - reach,
                    f"after {last.key}",
                )
            )
        if end >= reach:
            reach, last = end, job
    return [w for w in windows if w.length > 0]


@dataclass
class Moment:
    index: int
    stage: str
    what: str
    anchor: Anchor
    fraction: float
    offset: float  # seconds after the anchor
    at: float  # the same moment in the reference run (seconds since its start)


def draw_moments(
    windows: list[Window], n: int, seed: int, only: list[str] | None = None
) -> list[Moment]:
    """``n`` moments, stratified over the stages (all of the reference's, or those of ``only``
    that it has): shuffled stages taken in turn, then a window of that stage and a point 5-95 %
    into it, all from ``random.Random(seed)``."""
    rng = random.Random(seed)
    by_stage: dict[str, list[Window]] = {}
    for window in windows:
        by_stage.setdefault(window.stage, []).append(window)
    stages = [s for s in STAGE_ORDER if s in by_stage and (only is None or s in only)]
    moments: list[Moment] = []
    order: list[str] = []
    while len(moments) < n:
        if not order:
            order = stages[:]
            rng.shuffle(order)
        stage = order.pop()
        window = rng.choice(by_stage[stage])
        fraction = rng.uniform(0.05, 0.95)
        offset = fraction * window.length
        moments.append(
            Moment(
                len(moments),
                stage,
                window.what,
                window.anchor,
                round(fraction, 3),
                offset,
                window.start + offset,
            )
        )
    return moments


# ------------------------------------------------------------------------ tree and manifest
_TEMP_SUFFIXES = (".partial", ".tmp", ".part", "~")
# Snakemake's marker of a finished directory; the work_dir lock (nnunet_core.workflow.work_lock).
_SKIP_NAMES = {".snakemake_timestamp", ".workflow.lock"}
_PLOTS_OF_TIMES = ("progress.png", "run_times.png", "run_times.pdf", "run_times.svg")
_TIME_KEYS = ("epoch_start_timestamps", "epoch_end_timestamps")


def tree_files(root: Path) -> list[Path]:
    """Every file under ``root`` but Snakemake's own folder ``.snakemake``."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".snakemake" in dirnames:
            dirnames.remove(".snakemake")
        files += [Path(dirpath) / name for name in filenames]
    return sorted(files)


def is_log(rel: str) -> bool:
    return rel.startswith("work/logs/") or bool(re.search(r"/training_log_[\w]+\.txt$", rel))


def read_fully(path: Path) -> None:
    """Read a file as its format; raise if it is truncated or corrupt."""
    name = path.name
    if name.endswith(".json"):
        json.loads(path.read_text(encoding="utf-8"))
    elif name.endswith(".nii.gz"):
        import SimpleITK as sitk

        with gzip.open(path) as handle:
            while handle.read(1 << 20):
                pass
        sitk.GetArrayFromImage(sitk.ReadImage(str(path)))
    elif name.endswith(".npz"):
        import numpy as np

        with np.load(path) as archive:
            for key in archive.files:
                archive[key]
    elif name.endswith(".b2nd"):
        import blosc2

        blosc2.open(str(path), mode="r")[...]
    elif name.endswith(".pth"):
        import torch

        torch.load(path, map_location="cpu", weights_only=True)
    elif name.endswith(".png"):
        data = path.read_bytes()
        if not data.startswith(b"\x89PNG\r\n\x1a\n") or b"IEND" not in data[-16:]:
            raise ValueError("not a complete PNG")
    elif name.endswith(".csv"):
        with open(path, newline="", encoding="utf-8") as handle:
            list(csv.reader(handle))
    elif name.endswith((".zip",)):
        with zipfile.ZipFile(path) as archive:
            if archive.testzip() is not None:
                raise ValueError("corrupt zip member")


def half_written(rundir: Path, reference_empty: set[str] | None = None) -> list[str]:
    """Temporaries, unexpected empty files and files that do not read, under ``rundir``."""
    problems = []
    for path in tree_files(rundir):
        rel = str(path.relative_to(rundir))
        name = path.name
        if name in _SKIP_NAMES:
            continue
        if name.startswith(".") or name.endswith(_TEMP_SUFFIXES):
            problems.append(f"{rel}: temporary file left behind")
            continue
        size = path.stat().st_size
        if size == 0:
            if reference_empty is None or rel not in reference_empty:
                problems.append(f"{rel}: empty file")
            continue
        try:
            read_fully(path)
        except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
            problems.append(f"{rel}: does not read ({type(exc).__name__}: {exc})")
    return problems


def stale_markers(rundir: Path) -> list[str]:
    """The outputs Snakemake still marks incomplete (``.snakemake/incomplete``), relative."""
    folder = rundir / ".snakemake" / "incomplete"
    found = []
    for marker in sorted(folder.iterdir()) if folder.is_dir() else []:
        try:
            path = base64.urlsafe_b64decode(marker.name).decode()
        except (ValueError, UnicodeDecodeError):
            path = marker.name
        with contextlib.suppress(ValueError):
            path = str(Path(path).relative_to(rundir.resolve()))
        found.append(path)
    return found


def _plain(value: Any) -> Any:
    """A checkpoint's content as JSON-able values (tensors by their bytes' SHA-256)."""
    import torch

    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest = hashlib.sha256(tensor.view(torch.uint8).numpy().tobytes()).hexdigest()
        return f"tensor {tensor.dtype} {list(tensor.shape)} {digest}"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


def _drop_keys(value: Any, names: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _drop_keys(v, names) for k, v in value.items() if k not in names}
    if isinstance(value, list):
        return [_drop_keys(v, names) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def file_digest(path: Path) -> str:
    """What is compared of one file (see the module docstring for the exceptions)."""
    name = path.name
    if name in _PLOTS_OF_TIMES:
        read_fully(path)
        return "a readable plot of times (not compared)"
    if name.endswith(".pth"):
        import torch

        content = torch.load(path, map_location="cpu", weights_only=True)
        content = _plain(content)
        for key in _TIME_KEYS:
            content.get("logging", {}).pop(key, None)
        return "checkpoint " + _digest(content)
    if name == "provenance.json":
        record = json.loads(path.read_text())
        attempts = record.pop("attempts", [])
        record.pop("git", None)
        last = attempts[-1].get("status") if attempts else None
        return f"provenance (last attempt {last}) " + _digest(record)
    if name == "verify.json":
        report = json.loads(path.read_text())
        report.get("training_files", {}).pop("sha256", None)
        return "verify " + _digest(report)
    if name == "preprocess_summary.json":
        return "summary " + _digest(_drop_keys(json.loads(path.read_text()), ("seconds",)))
    return "sha256 " + hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(rundir: Path) -> dict[str, str]:
    """relative path -> what is compared, for every compared file under ``rundir``."""
    result = {}
    for path in tree_files(rundir):
        rel = str(path.relative_to(rundir))
        if path.name in _SKIP_NAMES or is_log(rel) or rel == "config.yaml":
            continue
        try:
            result[rel] = file_digest(path)
        except Exception as exc:  # noqa: BLE001 - reported as a difference
            result[rel] = f"unreadable: {type(exc).__name__}: {exc}"
    return result


def compare_manifests(reference: dict[str, str], other: dict[str, str]) -> list[str]:
    """Differences, one line each: missing, extra or different files."""
    lines = [f"missing: {rel}" for rel in sorted(set(reference) - set(other))]
    lines += [f"extra: {rel}" for rel in sorted(set(other) - set(reference))]
    lines += [
        f"different: {rel} ({reference[rel][:40]} vs {other[rel][:40]})"
        for rel in sorted(set(reference) & set(other))
        if reference[rel] != other[rel]
    ]
    return lines


def empty_files(rundir: Path) -> set[str]:
    return {str(p.relative_to(rundir)) for p in tree_files(rundir) if p.stat().st_size == 0}


# -------------------------------------------------------------------------------- campaign
@dataclass
class Reference:
    seconds: float
    windows: list[Window]
    manifest: dict[str, str]
    empty: set[str]
    jobs: list[Job]


@dataclass
class MomentResult:
    moment: Moment
    killed: bool
    killed_at: float | None
    stages_hit: list[str]
    jobs_hit: list[str]
    fault_returncode: int
    rerun_returncode: int | None  # None: the rerun was itself killed at the chain's next moment
    rerun_ok: bool
    unlocked: bool
    half_written: list[str]
    differences: list[str]
    escaped: list[str]
    seconds: float
    chain: int | None = None  # chained mode: the chain whose end state was checked
    stale_markers: list[str] = field(default_factory=list)  # Snakemake's, see the docstring

    @property
    def identical(self) -> bool:
        return self.rerun_ok and not self.differences

    @property
    def ok(self) -> bool:
        return self.killed and self.rerun_ok and not self.half_written and self.identical

    def row(self) -> dict[str, Any]:
        return {
            "moment": self.moment.index,
            "target stage": self.moment.stage,
            "target": self.moment.what,
            "offset s": round(self.moment.offset, 2),
            "stage hit": ", ".join(self.stages_hit) if self.killed else "(not killed)",
            "rerun ok": self.rerun_ok,
            "unlocked": self.unlocked,
            "clean": not self.half_written,
            "identical": self.identical,
        }


def failed_job_lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if _ERROR.match(line)]


class Campaign:
    """Reference run and fault moments in ``base/run`` (one path: the outputs name it).

    ``run_moment``: a fresh run killed at the moment, rerun to the end, checked. ``run_chain``
    (cheaper, for the test suite): one run killed at each moment in turn (in the order of the
    reference run), each rerun killed at the next moment, the last rerun going to the end; the end
    state is checked once for the whole chain. A rerun counts as ok there when it ran without a
    failed job until the next kill (and the last one exited 0).
    """

    def __init__(
        self,
        base: Path,
        *,
        repo: Path = REPO,
        env: dict[str, str] | None = None,
        epochs: int = 2,
        log=print,
    ) -> None:
        self.base = Path(base)
        self.rundir = self.base / "run"
        self.repo = Path(repo)
        self.env = env
        self.epochs = epochs
        self.log = log
        self.reference: Reference | None = None
        self.timeout = 1800.0

    def fresh_rundir(self) -> Path:
        if self.rundir.exists():
            shutil.rmtree(self.rundir)
        self.rundir.mkdir(parents=True)
        config = campaign_config(self.rundir / "work", self.epochs)
        (self.rundir / "config.yaml").write_text(yaml.safe_dump(config))
        return self.rundir

    def command(self, *extra: str) -> list[str]:
        return snakemake_command(self.rundir, self.repo, *extra)

    def _run(self, kill: Moment | None = None, *extra: str) -> RunResult:
        return run_workflow(
            self.rundir,
            self.command(*extra),
            env=self.env,
            kill=None if kill is None else (kill.anchor, kill.offset),
            timeout=self.timeout,
        )

    def run_reference(self) -> Reference:
        self.fresh_rundir()
        result = self._run()
        if result.returncode != 0:
            raise RuntimeError(f"reference run failed ({result.returncode}):\n{result.output}")
        problems = half_written(self.rundir)
        if problems:
            raise RuntimeError("reference run left half-written files:\n" + "\n".join(problems))
        self.reference = Reference(
            seconds=result.seconds,
            windows=stage_windows(result.jobs, result.seconds),
            manifest=manifest(self.rundir),
            empty=empty_files(self.rundir),
            jobs=result.jobs,
        )
        self.timeout = max(600.0, 8 * result.seconds)
        self.log(
            f"reference: {result.seconds:.1f} s, {len(result.jobs)} jobs, "
            f"{len(self.reference.manifest)} files compared"
        )
        return self.reference

    def rerun(self, kill: Moment | None = None) -> tuple[RunResult, bool]:
        """The same command again; after "Directory cannot be locked" the user's ``--unlock``
        (the same command with ``--unlock``), then the command once more."""
        result = self._run(kill)
        unlocked = False
        if result.returncode != 0 and result.killed_at is None and LOCKED in result.output:
            unlocked = self._run(None, "--unlock").returncode == 0
            result = self._run(kill)
        return result, unlocked

    def _check(self) -> tuple[list[str], list[str], list[str]]:
        assert self.reference is not None
        problems = half_written(self.rundir, self.reference.empty)
        differences = compare_manifests(self.reference.manifest, manifest(self.rundir))
        return problems, differences, stale_markers(self.rundir)

    def _keep(self, name: str, outputs: dict[str, str]) -> None:
        """Keep a failed moment's tree and Snakemake outputs under ``base/name``."""
        keep = self.base / name
        if keep.exists():
            shutil.rmtree(keep)
        shutil.copytree(self.rundir, keep, symlinks=True)
        for file_name, text in outputs.items():
            (keep / file_name).write_text(text)

    def _log_result(self, result: MomentResult) -> None:
        moment = result.moment
        if result.rerun_returncode is None:
            rerun = "rerun ran on" if result.rerun_ok else "rerun failed"
        else:
            rerun = "rerun ok" if result.rerun_ok else f"rerun exit {result.rerun_returncode}"
        self.log(
            f"moment {moment.index}: {moment.stage} ({moment.what} +{moment.offset:.2f} s) "
            f"hit {result.row()['stage hit']}; {rerun}"
            f"{' after --unlock' if result.unlocked else ''}; "
            f"{'clean' if not result.half_written else f'{len(result.half_written)} half-written'}"
            f"; {'identical' if result.identical else f'{len(result.differences)} differences'}"
            f" ({result.seconds:.0f} s)"
        )

    def run_moment(self, moment: Moment) -> MomentResult:
        """A fresh run killed at ``moment``, the same command rerun, the end state checked."""
        started = time.monotonic()
        self.fresh_rundir()
        fault = self._run(moment)
        rerun, unlocked = self.rerun()
        problems, differences, markers = self._check()
        result = MomentResult(
            moment=moment,
            killed=fault.killed_at is not None,
            killed_at=fault.killed_at,
            stages_hit=fault.stages_hit,
            jobs_hit=fault.jobs_hit,
            fault_returncode=fault.returncode,
            rerun_returncode=rerun.returncode,
            rerun_ok=rerun.returncode == 0,
            unlocked=unlocked,
            half_written=problems,
            differences=differences,
            escaped=fault.escaped,
            seconds=time.monotonic() - started,
            stale_markers=markers,
        )
        if not result.ok:
            self._keep(
                f"failed_moment_{moment.index}",
                {"fault_output.txt": fault.output, "rerun_output.txt": rerun.output},
            )
        self._log_result(result)
        return result

    def run_chain(self, moments: list[Moment]) -> list[MomentResult]:
        """One run killed at every moment in turn (see the class docstring). A moment whose anchor
        does not come before the run ends starts a new chain from a fresh run."""
        pending = sorted(moments, key=lambda m: m.at)
        results: list[MomentResult] = []
        chain = 0
        while pending:
            chain += 1
            self.fresh_rundir()
            started = time.monotonic()
            run = self._run(pending[0])
            unlocked = False
            members: list[tuple[Moment, RunResult, bool]] = []
            outputs = {}
            while True:
                moment = pending.pop(0)
                outputs[f"moment_{moment.index}_fault.txt"] = run.output
                killed = run.killed_at is not None
                if not killed:
                    # The anchor never came: this run ended by itself; the moment goes last.
                    members.append((moment, run, unlocked))
                    final = run
                    break
                next_moment = pending[0] if pending else None
                rerun, rerun_unlocked = self.rerun(next_moment)
                members.append((moment, run, unlocked))
                run, unlocked = rerun, rerun_unlocked
                if next_moment is None or rerun.killed_at is None:
                    final = rerun
                    outputs["final_rerun.txt"] = rerun.output
                    break
            problems, differences, markers = self._check()
            final_ok = final.returncode == 0
            for position, (moment, fault, _) in enumerate(members):
                killed = fault.killed_at is not None
                last = position == len(members) - 1
                if last:
                    rerun_code: int | None = final.returncode
                    rerun_ok = final_ok and killed
                    rerun_unlocked = unlocked if killed else False
                else:
                    after = members[position + 1][1]
                    rerun_code = None
                    rerun_ok = not failed_job_lines(after.output) and after.killed_at is not None
                    rerun_unlocked = members[position + 1][2]
                result = MomentResult(
                    moment=moment,
                    killed=killed,
                    killed_at=fault.killed_at,
                    stages_hit=fault.stages_hit,
                    jobs_hit=fault.jobs_hit,
                    fault_returncode=fault.returncode,
                    rerun_returncode=rerun_code,
                    rerun_ok=rerun_ok,
                    unlocked=rerun_unlocked,
                    half_written=problems,
                    differences=differences if final_ok else ["the chain's last run failed"],
                    escaped=fault.escaped,
                    seconds=(time.monotonic() - started) / len(members),
                    chain=chain,
                    stale_markers=markers,
                )
                results.append(result)
                self._log_result(result)
            if not all(r.ok for r in results[-len(members) :]):
                self._keep(f"failed_chain_{chain}", outputs)
        return sorted(results, key=lambda r: r.moment.index)


def totals(results: list[MomentResult]) -> dict[str, Any]:
    hit = sorted(
        {s for r in results if r.killed for s in r.stages_hit},
        key=lambda s: STAGE_ORDER.index(s) if s in STAGE_ORDER else 99,
    )
    return {
        "moments tried": len(results),
        "moments killed": sum(r.killed for r in results),
        "stages covered": len(hit),
        "stages": hit,
        "reruns completed": sum(r.rerun_ok for r in results),
        "reruns needing --unlock": sum(r.unlocked for r in results),
        "no half-written file": sum(not r.half_written for r in results),
        "outputs identical": sum(r.identical for r in results),
        "stale Snakemake incomplete markers": sum(bool(r.stale_markers) for r in results),
    }


def report_json(reference: Reference, results: list[MomentResult], seed: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "reference_seconds": round(reference.seconds, 2),
        "reference_windows": [asdict(w) for w in reference.windows],
        "totals": totals(results),
        "moments": [
            {
                **r.row(),
                "moment detail": asdict(r.moment),
                "jobs hit": r.jobs_hit,
                "killed at s": r.killed_at,
                "fault exit": r.fault_returncode,
                "rerun exit": r.rerun_returncode,
                "chain": r.chain,
                "half written": r.half_written,
                "differences": r.differences,
                "escaped the process group": r.escaped,
                "stale incomplete markers": r.stale_markers,
                "seconds": round(r.seconds, 1),
            }
            for r in results
        ],
    }
