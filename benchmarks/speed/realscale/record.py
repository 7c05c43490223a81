"""The real-scale record: one entry per stage, the JSON file anyone can read without our code, and
the table printed beside it (pure parts of ``realscale``, tested without running anything).

Record shape (issue 34), extra keys only beside the required ones::

    {"machine": str, "commit": str, "dataset": str,
     "stages": {NAME: {"ours_s", "upstream_s", "ratio", "ours_peak_mb", "upstream_peak_mb"}}}
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from nnunet_core.io.atomic import write_json

REQUIRED_STAGE_KEYS = ("ours_s", "upstream_s", "ratio", "ours_peak_mb", "upstream_peak_mb")
# GPU step times the loader table is read against: a worker must deliver a batch per step.
GPU_STEPS_S = (0.1, 0.2, 0.4)


def stage_entry(
    ours_s: float | None,
    upstream_s: float | None,
    ours_peak_mb: float | None = None,
    upstream_peak_mb: float | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """One stage: ratio is always ours_s / upstream_s (lower is better), None where either side
    is missing."""
    ours_s, upstream_s = _round(ours_s, 6), _round(upstream_s, 6)
    ratio = None
    if ours_s is not None and upstream_s:  # from the figures written, so a reader gets the same
        ratio = round(ours_s / upstream_s, 3)
    entry: dict[str, Any] = {
        "ours_s": ours_s,
        "upstream_s": upstream_s,
        "ratio": ratio,
        "ours_peak_mb": _round(ours_peak_mb, 1),
        "upstream_peak_mb": _round(upstream_peak_mb, 1),
    }
    if note:
        entry["note"] = note
    return entry


def absent_stage(why: str) -> dict[str, Any]:
    """A stage that was not measured: every figure null, the reason in its note."""
    return stage_entry(None, None, note=f"absent: {why}")


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)


def workers_needed(seconds_per_batch: float, steps: tuple[float, ...] = GPU_STEPS_S) -> list[int]:
    """Worker processes that keep a GPU step of each length fed: ceil(seconds_per_batch / step)."""
    if seconds_per_batch <= 0:
        msg = f"seconds per batch must be positive, got {seconds_per_batch}"
        raise ValueError(msg)
    return [math.ceil(round(seconds_per_batch / step, 9)) for step in steps]


def workers_table(stages: dict[str, dict[str, Any]]) -> dict[str, dict[str, list[int] | None]]:
    """Per loader stage and side, the workers needed for each of GPU_STEPS_S."""
    table: dict[str, dict[str, list[int] | None]] = {}
    for name, entry in stages.items():
        if not name.startswith("loader_") or entry["ours_s"] is None:
            continue
        upstream = entry["upstream_s"]
        table[name] = {
            "ours": workers_needed(entry["ours_s"]),
            "upstream": workers_needed(upstream) if upstream else None,
        }
    return table


def machine_description() -> str:
    """Host, CPU model, cores and memory, e.g. ``box: Intel Xeon ..., 2 cores, 24 GiB``."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores{memory}"


def commit_description(repository: Path) -> str:
    """``git rev-parse HEAD`` of the checkout, ``-dirty`` when tracked files differ."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repository), *args], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def make_record(
    machine: str, commit: str, dataset: str, stages: dict[str, dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """The record in the issue's shape; ``extra`` adds top-level keys after the required ones."""
    for name, entry in stages.items():
        missing = [k for k in REQUIRED_STAGE_KEYS if k not in entry]
        if missing:
            msg = f"stage {name}: missing {', '.join(missing)}"
            raise ValueError(msg)
    record = {"machine": machine, "commit": commit, "dataset": dataset, "stages": stages}
    record.update(extra)
    record["workers_needed"] = {
        "gpu_step_s": list(GPU_STEPS_S),
        "stages": workers_table(stages),
    }
    return record


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Atomically: a reader sees the previous file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)


def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(record: dict[str, Any]) -> str:
    """The stages as a text table, then the workers needed per loader stage."""
    header = f"{'stage':<26}{'ours s':>10}{'upstream s':>12}{'ratio':>8}{'ours MB':>10}"
    header += f"{'upstream MB':>13}"
    lines = [header, "-" * len(header)]
    for name, entry in record["stages"].items():
        digits = 3 if name.startswith("loader_") else 1
        lines.append(
            f"{name:<26}{_cell(entry['ours_s'], digits):>10}"
            f"{_cell(entry['upstream_s'], digits):>12}{_cell(entry['ratio']):>8}"
            f"{_cell(entry['ours_peak_mb'], 0):>10}{_cell(entry['upstream_peak_mb'], 0):>13}"
        )
    workers = record["workers_needed"]["stages"]
    if workers:
        steps = "/".join(f"{s * 1000:.0f}" for s in record["workers_needed"]["gpu_step_s"])
        lines += ["", f"workers needed to feed a GPU step of {steps} ms (ours | upstream):"]
        for name, sides in workers.items():
            ours = "/".join(map(str, sides["ours"]))
            peer = "/".join(map(str, sides["upstream"])) if sides["upstream"] else "-"
            lines.append(f"  {name:<24}{ours:>12} | {peer}")
    notes = [f"  {n}: {e['note']}" for n, e in record["stages"].items() if e.get("note")]
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines)
