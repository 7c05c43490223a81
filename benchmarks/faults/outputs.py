"""The end state of a run: half-written files, Snakemake's stale markers, the manifest.

What counts as identical between two runs (and what is left out or compared loosely) is in
README.md beside this file.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import gzip
import hashlib
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

_TEMP_SUFFIXES = (".partial", ".tmp", ".part", "~")
# Snakemake's marker of a finished directory; the work_dir lock (nnunet_core.workflow.work_lock).
_SKIP_NAMES = {".snakemake_timestamp", ".workflow.lock"}
_PLOTS_OF_TIMES = ("progress.png", "run_times.png", "run_times.pdf", "run_times.svg")
_PLOTS_OF_TIMES += ("data_wait.png", "data_wait.pdf", "data_wait.svg")
_TIME_KEYS = ("epoch_start_timestamps", "epoch_end_timestamps")
_TIME_KEYS += ("data_wait_seconds", "compute_seconds", "peak_gpu_memory_mb")
# report.md's sections of measured times: data-wait shares (nnunet_core.report.bottleneck) and
# the run times, whose job list is the latest attempt of each job (a killed run's rerun differs)
_TIMED_SECTIONS = ("## Data loading", "## Run times")


def _without_timed_section(page: str) -> str:
    """``report.md`` without its sections of measured times (each up to the next ``## ``)."""
    kept, skipping = [], False
    for line in page.splitlines():
        if line.startswith("## "):
            skipping = line.strip() in _TIMED_SECTIONS
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


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
    if name == "report.md" and path.parent.name == "report":
        return "report page " + _digest(_without_timed_section(path.read_text()))
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
