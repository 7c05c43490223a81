"""Wall time per job: training attempts from ``provenance.json``, other jobs from Snakemake's log.

Every training attempt (a walltime-stopped run continued with ``--c`` is several) records its
start, end, host and device in the fold's ``provenance.json``. Other stages record nothing, so
Snakemake's own logs (``.snakemake/log/*.snakemake.log``) are parsed best effort: a job starts at
the timestamp above its ``rule NAME:`` block (or its one ``Job N: NAME ...`` line, from the
rule's message) and ends at the timestamp above
``Finished jobid: N``. Jobs without an end (failed, still running) are left out.
"""

from __future__ import annotations

import json
import re
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

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\S+):$")
# A rule with a `message` (the workflow's one line per job, nnunet_core.workflow.console):
# "Job 12: train configuration=2d,fold=0, log: ..."
_MESSAGE = re.compile(r"^Job (\d+): (\w+)(?: (\S+=[^ ]*?))?(?:, log: .*)?$")
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
        elif match := _MESSAGE.match(line):
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
