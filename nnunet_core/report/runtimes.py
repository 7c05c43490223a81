"""Wall time per job: training attempts from ``provenance.json``, every other job from Snakemake.

Every training attempt (a walltime-stopped run continued with ``--c`` is several) records its
start, end, host and device in the fold's ``provenance.json``. For the other jobs, Snakemake keeps
a record per output file in ``.snakemake/metadata/`` (the file name is the output path in
URL-safe base64, split into folders when long): its ``rule``, ``log`` files, ``starttime`` and
``endtime`` (epoch seconds). The records of one run's jobs are found by their log files, which
lie in that run's log folders; the ``train`` rule's are left out (its attempts come from
provenance). Snakemake's own logs (``.snakemake/log/*.snakemake.log``) can be parsed too, best
effort: a job starts at the timestamp above its ``rule NAME:`` block (or its one ``Job N: NAME
...`` line, from the rule's message) and ends at the timestamp above ``Finished jobid: N``. Jobs
without an end (failed, still running) are left out.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

RUN_TIME_COLUMNS = [
    "job",
    "stage",
    "source",
    "start",
    "end",
    "seconds",
    "host",
    "device",
    "status",
]
PROVENANCE = "provenance.json"
SOURCE_PROVENANCE = "provenance.json"
SOURCE_SNAKEMAKE = "snakemake log"
SOURCE_RECORDS = "snakemake records"
PROVENANCE_RULES = ("train",)  # their run times come from provenance.json

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
# A rule with a `message` (the workflow's one line per job, nnunet_core.workflow.console):
# "Job 12: train configuration=2d,fold=0, log: ..." (groups: jobid, rule, wildcards, logs); the
# fault campaign's watcher (benchmarks/faults) reads live runs with it too
JOB_MESSAGE = re.compile(r"^Job (\d+): (\w+)(?: (\S+=[^ ]*?))?(?:, log: (.*?))?\s*$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
_FINISHED = re.compile(r"^Finished (?:jobid: (\d+)|job (\d+)\.)")


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    # Snakemake logs local wall-clock time without a zone: compare like with like
    return moment.astimezone().replace(tzinfo=None) if moment.tzinfo else moment


def _device(entry: dict[str, Any]) -> str:
    device = entry.get("device") or {}
    if not isinstance(device, dict):
        return str(device)
    return str(device.get("gpu") or device.get("name") or device.get("type") or "")


def provenance_rows(provenance_file: Path, model: str, configuration: str, fold: str) -> list[dict]:
    """One row per finished attempt of a fold's training."""
    try:
        record = json.loads(provenance_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    rows = []
    attempts = record.get("attempts", []) if isinstance(record, dict) else []
    for index, attempt in enumerate(attempts):
        start, end = _time(attempt.get("start")), _time(attempt.get("end"))
        if start is None or end is None:
            continue
        suffix = f" (attempt {index + 1})" if len(attempts) > 1 else ""
        rows.append(
            {
                "job": f"train {configuration} fold {fold}{suffix}",
                "stage": "train",
                "source": SOURCE_PROVENANCE,
                "start": start,
                "end": end,
                "seconds": (end - start).total_seconds(),
                "host": attempt.get("host", ""),
                "device": _device(attempt),
                "status": attempt.get("status", ""),
                "model": model,
            }
        )
    return rows


def _snakemake_time(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")


def snakemake_log_rows(log_file: Path) -> list[dict]:
    """Finished jobs of one Snakemake run log (job ids are unique within one log)."""
    stamp: datetime | None = None
    started: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    rows = []
    for line in log_file.read_text(encoding="utf-8", errors="replace").splitlines():
        if match := _STAMP.match(line.strip()):
            stamp = _snakemake_time(match.group(1))
            current = None
        elif match := _RULE.match(line):
            current = {"rule": match.group(1), "start": stamp, "wildcards": ""}
        elif match := JOB_MESSAGE.match(line):
            wildcards = (match.group(3) or "").replace(",", ", ")
            started[match.group(1)] = {
                "rule": match.group(2),
                "start": stamp,
                "wildcards": wildcards,
            }
            current = None
        elif current is not None and (match := _JOBID.match(line)):
            started[match.group(1)] = current
        elif current is not None and (match := _WILDCARDS.match(line)):
            current["wildcards"] = match.group(1).strip()
        elif match := _FINISHED.match(line.strip()):
            job = started.pop(match.group(1) or match.group(2), None)
            if job is None or job["start"] is None or stamp is None:
                continue
            wildcards = f" [{job['wildcards']}]" if job["wildcards"] else ""
            rows.append(
                {
                    "job": f"{job['rule']}{wildcards}",
                    "stage": job["rule"],
                    "source": SOURCE_SNAKEMAKE,
                    "start": job["start"],
                    "end": stamp,
                    "seconds": (stamp - job["start"]).total_seconds(),
                    "host": "",
                    "device": "",
                    "status": "finished",
                }
            )
    return rows


def snakemake_rows(log_dir: Path) -> list[dict]:
    """Jobs from every ``*.snakemake.log`` under ``log_dir`` (a rerun's jobs appear again)."""
    rows: list[dict] = []
    for log_file in sorted(log_dir.rglob("*.snakemake.log")):
        rows += snakemake_log_rows(log_file)
    return rows


def run_times_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=[*RUN_TIME_COLUMNS, "model"])
    return frame.sort_values(["start", "job"], kind="stable").reset_index(drop=True)


def _record_output(record_file: Path, metadata_dir: Path) -> str | None:
    """The output path a metadata record is named after (None for a foreign file)."""
    encoded = "".join(record_file.relative_to(metadata_dir).parts)
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _inside(path: str, base: Path, folders: Sequence[Path]) -> bool:
    resolved = (base / path).resolve()  # a relative log path is relative to the workdir
    return any(resolved.is_relative_to(folder) for folder in folders)


def snakemake_record_rows(metadata_dir: Path, log_dirs: Sequence[Path]) -> list[dict]:
    """One row per job whose log lies in ``log_dirs``, from Snakemake's per-output records (a
    job with several outputs once); the ``train`` rule's jobs are left to provenance."""
    folders = [Path(d).resolve() for d in log_dirs]
    base = Path(metadata_dir).resolve().parent.parent  # the workdir holding .snakemake/
    jobs: dict[tuple, dict] = {}
    for record_file in sorted(p for p in Path(metadata_dir).rglob("*") if p.is_file()):
        if _record_output(record_file, metadata_dir) is None:
            continue
        try:
            record = json.loads(record_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        logs = [str(x) for x in record.get("log") or []]
        rule, start, end = record.get("rule"), record.get("starttime"), record.get("endtime")
        if rule in PROVENANCE_RULES or start is None or end is None or record.get("incomplete"):
            continue
        if not logs or not any(_inside(log, base, folders) for log in logs):
            continue
        name = Path(logs[0]).stem
        key = (rule, name, record.get("job_hash"), end)  # a job's outputs share hash and end
        if key in jobs:  # another output of a job already seen: the earliest start counts
            start = min(float(start), jobs[key]["start"].timestamp())
        jobs[key] = {
            "job": name if name == rule else f"{rule}: {name}",
            "stage": rule,
            "source": SOURCE_RECORDS,
            "start": datetime.fromtimestamp(float(start)),
            "end": datetime.fromtimestamp(float(end)),
            "seconds": float(end) - float(start),
            "host": "",
            "device": "",
            "status": "finished",
        }
    return list(jobs.values())
