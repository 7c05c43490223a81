"""Where a run may write: a work_dir of its own, apart from the raw data it reads.

The workflow writes (and deletes, when a job reruns) under ``work_dir/{preprocessed, results,
predictions, logs, pretrained, paper}``. A ``raw_root`` inside one of them once made Snakemake
report a cyclic dependency, go on, and delete the raw ``dataset.json``; ``work_dir: /`` was
accepted. So before any job (``check_config``) one line refuses, naming both paths: a work_dir
that is ``/``, the home folder or a folder above it; one that is a raw dataset folder or an
nnUNet_raw root (``DatasetXXX_*`` folders with a ``dataset.json``); a work_dir inside
``raw_root``, ``raw_root`` equal to it, or ``raw_root`` inside a folder the workflow writes.
``work_dir/raw`` (where the synthetic demo writes its dataset) is the workflow's own raw folder
and stays allowed. Paths are compared with symlinks resolved.
"""

from __future__ import annotations

import os
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.prediction_output import is_raw_dataset_folder
from nnunet_core.layout.predictions import PREDICTIONS_FOLDER
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.roots import DATASET_NAME_RE
from nnunet_core.layout.work import (
    PAPER_FOLDER,
    PRETRAINED_FOLDER,
    WORK_LOGS,
    WORK_PREPROCESSED,
    WORK_RESULTS,
)

# The folders of work_dir the workflow writes and deletes in (work_dir/raw is only written by
# the synthetic demo, which owns that dataset).
WRITTEN_FOLDERS = (
    WORK_PREPROCESSED,
    WORK_RESULTS,
    PREDICTIONS_FOLDER,
    WORK_LOGS,
    PRETRAINED_FOLDER,
    PAPER_FOLDER,
)


def _dataset_held(folder: Path) -> str | None:
    """The ``DatasetXXX_*`` folder (with its dataset.json) that makes ``folder`` an nnUNet_raw
    root, else None."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return None
    return next(
        (
            entry.name
            for entry in entries
            if DATASET_NAME_RE.match(entry.name) and (entry / DATASET_JSON).is_file()
        ),
        None,
    )


def check_work_dir_alone(work_dir: str | os.PathLike) -> None:
    """``work_dir`` is no system or home folder and holds no dataset (one line otherwise)."""
    work = Path(work_dir).resolve()
    home = Path.home().resolve()
    if work == Path(work.anchor):
        msg = (
            f"config work_dir: {work_dir} ({work}) is the file system's root; the workflow writes "
            "and deletes folders in it: give the run a folder of its own"
        )
        raise ConfigurationError(msg)
    if work == home or home.is_relative_to(work):
        what = "the home folder" if work == home else f"a folder above the home folder {home}"
        msg = (
            f"config work_dir: {work_dir} ({work}) is {what}; the workflow writes and deletes "
            f"{', '.join(WRITTEN_FOLDERS)} in it: give the run a folder of its own"
        )
        raise ConfigurationError(msg)
    held = None
    if work.is_dir():
        held = DATASET_JSON if is_raw_dataset_folder(work) else _dataset_held(work)
    if held is not None:
        what = "a raw dataset folder" if held == DATASET_JSON else f"a raw data root (holds {held})"
        msg = (
            f"config work_dir: {work_dir} ({work}) is {what}; the workflow writes and deletes "
            "folders in work_dir: give the run a folder of its own, apart from the raw data"
        )
        raise ConfigurationError(msg)


def check_raw_root_apart(work_dir: str | os.PathLike, raw_root: str | os.PathLike) -> None:
    """``raw_root`` and ``work_dir`` do not overlap, except that raw_root may be work_dir/raw
    (or any folder of work_dir the workflow does not write)."""
    work, raw = Path(work_dir).resolve(), Path(raw_root).resolve()
    if raw == work:
        msg = (
            f"config dataset.raw_root: {raw_root} is work_dir {work_dir} itself ({work}); the "
            "workflow writes and deletes folders there: keep the raw data apart from work_dir"
        )
        raise ConfigurationError(msg)
    if work.is_relative_to(raw):
        msg = (
            f"config work_dir: {work_dir} ({work}) is inside dataset.raw_root {raw_root} ({raw}); "
            "the workflow writes and deletes folders in work_dir: keep it out of the raw data"
        )
        raise ConfigurationError(msg)
    for name in WRITTEN_FOLDERS:
        if raw.is_relative_to(work / name):
            msg = (
                f"config dataset.raw_root: {raw_root} ({raw}) is inside {name}/ of work_dir "
                f"{work_dir}, which the workflow writes and deletes: keep the raw data apart "
                "from work_dir"
            )
            raise ConfigurationError(msg)


def check_work_dir_placement(work_dir: str | os.PathLike, raw_root: object) -> None:
    """Both checks; ``raw_root`` unset or blank (the synthetic demo, or a config error the
    raw dataset check names) is skipped."""
    if isinstance(raw_root, str | os.PathLike) and str(raw_root).strip():
        check_raw_root_apart(work_dir, raw_root)
    check_work_dir_alone(work_dir)
