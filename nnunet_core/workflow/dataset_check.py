"""The raw dataset's integrity check, run by the main Snakemake process before its first job.

Why here and not (only) as the ``verify_dataset`` job: a failed job is reported by Snakemake in
a block of 60-75 lines (every input file, the command, the log path, an exception), and the
problems themselves stay in the job's log. Run while the workflow is read, the check's problems
are the first lines of the run, one line each, and the run stops (exit 2) before any job and
before Snakemake builds its job graph. The check does the same work the job would do, once: on a
clean dataset it writes the same report (``verify.json``), so the job has nothing left to do.

It runs only where the job would run: a real run (not a dry run: it writes nothing), of a
user's dataset (the synthetic demo data is made by a job, later), whose report is missing or no
longer covers the raw files (one newer than the report, a file added or removed, another raw
folder). A report written by another nnunet-core version alone is left alone, as Snakemake
leaves the job alone: re-checking would rewrite it and rerun everything after it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnunet_core.dataset.verify import training_files_manifest
from nnunet_core.dataset.verify_record import verify_one
from nnunet_core.errors import DatasetError
from nnunet_core.io.atomic import read_json
from nnunet_core.io.dataset_json import load_dataset_json
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.roots import Roots, raw_dataset_dir
from nnunet_core.workflow import work_lock

# the problem lines say which command reports the same on its own
PREFIX = "nnunet-core verify"


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def recheck_reason(report_path: Path, raw_dir: Path, inputs: Sequence[Path]) -> str | None:
    """Why the dataset must be checked again (None: ``report_path`` covers it as it is).

    ``inputs``: the ``verify_dataset`` rule's input files (dataset.json and the training files),
    whose modification times Snakemake compares with the report's."""
    written = _mtime(report_path)
    if written is None:
        return "no report yet"
    newest = max((t for t in map(_mtime, inputs) if t is not None), default=None)
    if newest is not None and newest > written:
        return "a raw file is newer than the report"
    try:
        report: Any = read_json(report_path)
    except (OSError, ValueError):
        return "the report cannot be read"
    if not isinstance(report, dict):
        return "the report is no verify report"
    if Path(str(report.get("raw_dir"))).resolve() != raw_dir.resolve():
        return f"the report checked {report.get('raw_dir')}"
    try:
        dataset_json = load_dataset_json(raw_dir / DATASET_JSON)
    except DatasetError:
        return f"{DATASET_JSON} cannot be read"
    if report.get("training_files") != training_files_manifest(raw_dir, dataset_json):
        return "raw files were added, removed or changed since the report"
    return None


def check_before_jobs(
    roots: Roots,
    dataset: str,
    report_path: Path,
    inputs: Sequence[Path],
    num_processes: int,
    work_dir: Path | None = None,
) -> bool:
    """Check the raw dataset now where the ``verify_dataset`` job would run; True when it did.

    A broken dataset: the lines ``nnunet-core verify`` prints (``nnunet-core verify: error:
    <problem>``, one per problem, the last one raised as ``DatasetError`` for the caller to end
    the process with, ``workflow.parse_errors``). A clean one gets its report, and one line on
    stdout saying so. ``work_dir``: its lock is taken first (``workflow.work_lock``, otherwise
    taken when the first job starts), so that the report of a workflow running there is not
    rewritten or removed under it."""
    raw_dir = raw_dataset_dir(roots, dataset)
    if recheck_reason(report_path, raw_dir, inputs) is None:
        return False
    if work_dir is not None:
        work_lock.acquire(work_dir)
    try:
        verify_one(roots, dataset, num_processes, report_path, PREFIX, progress=False)
    except DatasetError as exc:  # its last line as the command's own: "...: error: ..."
        raise DatasetError(f"{PREFIX}: error: {exc}") from None
    return True
