"""Provenance of a fold: what produced its checkpoint, so a result can be traced and re-run.

``provenance.json`` in the fold folder holds the package versions, the git commit of the source
(if it is a checkout), the run's settings, a hash of the plans, the seed, and one entry per
attempt (host, device, start/end, the epoch it started from, how it ended: finished, stopped,
failed, or killed when it died without a word): a training continued after a walltime stop shows
every job that contributed. Each attempt also says what its weights started from
(``start_weights``): the fold's own checkpoint it continued from, pretrained weights (their file,
sha256 and the keys not loaded), or a fresh initialisation; a fine-tuned model names its origin.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from nnunet_core.cluster.slurm import SlurmEnvironment
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.plans import Plans

PROVENANCE_JSON = "provenance.json"
PACKAGES = ("nnunet-core", "torch", "numpy", "scipy", "blosc2", "SimpleITK", "snakemake")


def now_iso() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    """Installed versions (None for a package that is not installed), plus Python's."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    versions["cuda"] = torch.version.cuda
    versions["cudnn"] = (
        str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None
    )
    return versions


def git_commit(folder: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """Commit and dirty flag of the checkout holding ``folder`` (the package); None outside git."""
    folder = Path(folder) if folder is not None else Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def plans_sha256(plans: Plans) -> str:
    """Hash of the plans' content (key order kept), independent of the file's formatting."""
    text = json.dumps(plans.raw, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks (checkpoints can be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def continued_start(checkpoint: str | os.PathLike, epoch: int) -> dict[str, Any]:
    """``start_weights`` of an attempt that continued from the fold's own checkpoint."""
    return {"from": "checkpoint", "path": str(Path(checkpoint).resolve()), "epoch": epoch}


def pretrained_start(weights: str | os.PathLike, not_loaded: list[str]) -> dict[str, Any]:
    """``start_weights`` of an attempt that started from pretrained weights: the file (absolute),
    its sha256 (the path alone does not say which weights it held) and what it did not load."""
    path = Path(weights).resolve()
    return {
        "from": "pretrained",
        "path": str(path),
        "sha256": file_sha256(path),
        "not_loaded": list(not_loaded),
    }


FRESH_START: dict[str, Any] = {"from": "fresh"}


def device_description(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"type": device.type, "name": str(device)}
    if device.type == "cuda" and torch.cuda.is_available():
        index = device.index if device.index is not None else torch.cuda.current_device()
        info["gpu"] = torch.cuda.get_device_name(index)
        info["cuda_visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    if device.type == "cpu":
        info["threads"] = torch.get_num_threads()
    return info


def start_attempt(
    path: str | os.PathLike,
    settings: dict[str, Any],
    plans: Plans,
    seed: int,
    device: torch.device,
    start_epoch: int,
    start_weights: dict[str, Any] | None = None,
    fold_settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write (or extend) ``provenance.json`` with a new attempt; returns the record.

    ``start_weights``: what the attempt's weights came from (``continued_start``,
    ``pretrained_start``, ``FRESH_START``); None records a fresh start. ``fold_settings``: the
    values of the settings table (``training.fold.settings_table``) this attempt trains with,
    kept as ``settings`` (``training.fold.changes`` compares the next run's with them)."""
    path = Path(path)
    record = read_json(path) if path.is_file() else {}
    attempts = list(record.get("attempts", []))
    for earlier in attempts:
        # Still "running" although this one starts (the fold lock rules out two at once): it was
        # killed (node failure, scancel, OOM) before it could close its record.
        if earlier.get("status") == "running":
            earlier["status"] = "killed"
    attempts.append(
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": device_description(device),
            "argv": list(sys.argv),
            "slurm_job_id": SlurmEnvironment().job_id(),
            "start": now_iso(),
            "end": None,
            "start_epoch": start_epoch,
            "start_weights": dict(start_weights or FRESH_START),
            "end_epoch": None,
            "status": "running",
        }
    )
    record.update(
        {
            "versions": package_versions(),
            "git": git_commit(),
            "config": settings,
            "plans_sha256": plans_sha256(plans),
            "seed": seed,
            "attempts": attempts,
        }
    )
    if fold_settings is not None:
        record["settings"] = fold_settings
    write_json(path, record)
    return record


def end_attempt(path: str | os.PathLike, status: str, end_epoch: int) -> None:
    """Close the last attempt with its end time, the epoch reached and how it ended."""
    path = Path(path)
    if not path.is_file():
        return
    record = read_json(path)
    if record.get("attempts"):
        record["attempts"][-1].update(end=now_iso(), end_epoch=end_epoch, status=status)
    write_json(path, record)
