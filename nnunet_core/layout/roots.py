"""The three roots and the dataset folders in them (upstream's layout).

Roots come from ``nnUNet_raw``, ``nnUNet_preprocessed`` and ``nnUNet_results``; every command can
override them with ``--raw``, ``--preprocessed`` and ``--results``. Inside each root a dataset has
its folder ``DatasetXXX_Name``; the names inside those folders live in the sibling modules
``raw``, ``preprocessed``, ``results``, ``predictions`` and ``work`` of ``nnunet_core.layout``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.work import WORK_PREPROCESSED, WORK_RAW, WORK_RESULTS

RAW_ENV = "nnUNet_raw"
PREPROCESSED_ENV = "nnUNet_preprocessed"
RESULTS_ENV = "nnUNet_results"

DATASET_NAME_RE = re.compile(r"^Dataset(\d{3})_([A-Za-z0-9_\-]+)$")

__all__ = [
    "DATASET_NAME_RE",
    "PREPROCESSED_ENV",
    "RAW_ENV",
    "RESULTS_ENV",
    "Roots",
    "dataset_folder_name",
    "preprocessed_dataset_dir",
    "raw_dataset_dir",
    "resolve_dataset_name",
    "results_dataset_dir",
]


def _root(flag_value: str | os.PathLike | None, env_name: str) -> Path:
    if flag_value is not None:
        return Path(flag_value)
    value = os.environ.get(env_name)
    if not value:
        flag = {"nnUNet_raw": "--raw", "nnUNet_preprocessed": "--preprocessed"}.get(
            env_name, "--results"
        )
        msg = f"{env_name} is not set: export {env_name}=/path or pass {flag}"
        raise ConfigurationError(msg)
    return Path(value)


@dataclass(frozen=True)
class Roots:
    """The three root folders of a run."""

    raw: Path | None = None
    preprocessed: Path | None = None
    results: Path | None = None

    @classmethod
    def from_env(
        cls,
        raw: str | os.PathLike | None = None,
        preprocessed: str | os.PathLike | None = None,
        results: str | os.PathLike | None = None,
    ) -> Roots:
        """Flags win over environment variables; a root that is missing raises only when used."""
        return cls(
            raw=Path(raw) if raw else _optional_env(RAW_ENV),
            preprocessed=Path(preprocessed) if preprocessed else _optional_env(PREPROCESSED_ENV),
            results=Path(results) if results else _optional_env(RESULTS_ENV),
        )

    @classmethod
    def in_work_dir(
        cls, work_dir: str | os.PathLike, raw: str | os.PathLike | None = None
    ) -> Roots:
        """The workflow's roots: ``work_dir/{raw,preprocessed,results}`` (raw may live
        elsewhere)."""
        work = Path(work_dir)
        return cls(
            raw=Path(raw) if raw else work / WORK_RAW,
            preprocessed=work / WORK_PREPROCESSED,
            results=work / WORK_RESULTS,
        )

    def require_raw(self) -> Path:
        return _root(self.raw, RAW_ENV)

    def require_preprocessed(self) -> Path:
        return _root(self.preprocessed, PREPROCESSED_ENV)

    def require_results(self) -> Path:
        return _root(self.results, RESULTS_ENV)

    def require_existing(self, kind: str, reader: str, flag: str = "") -> Path:
        """Root ``kind`` (``raw``, ``preprocessed`` or ``results``), which the command ``reader``
        reads its input from: unset, missing or not a folder is a one-line error naming where it
        came from (``flag``, else the environment variable) and the path, instead of an empty
        folder created for a typo."""
        path = {
            "raw": self.require_raw,
            "preprocessed": self.require_preprocessed,
            "results": self.require_results,
        }[kind]()
        if not path.is_dir():
            env = {"raw": RAW_ENV, "preprocessed": PREPROCESSED_ENV, "results": RESULTS_ENV}[kind]
            given_as = f"{flag} {path}" if flag else f"{env}={path}"
            what = "is not a folder" if path.exists() else "no such folder"
            msg = f"{given_as}: {what} ({reader} reads its input from the {kind} root)"
            raise ConfigurationError(msg)
        return path


def _optional_env(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value) if value else None


def dataset_folder_name(dataset_id: int, name: str) -> str:
    """``(900, 'Synth')`` -> ``'Dataset900_Synth'``."""
    return f"{_dataset_prefix(dataset_id)}{name}"


def _dataset_prefix(dataset_id: int) -> str:
    return f"Dataset{int(dataset_id):03d}_"


def resolve_dataset_name(dataset: str | int, roots: Roots) -> str:
    """Turn ``-d 900`` or ``-d Dataset900_Synth`` into the full dataset folder name.

    An id is looked up in every root that is set (raw first); a full name is returned as is.
    """
    text = str(dataset).strip()
    if DATASET_NAME_RE.match(text):
        return text
    if not text.isdigit():
        msg = f"dataset {text!r} is neither an id (e.g. 900) nor a name like Dataset900_Synth"
        raise ConfigurationError(msg)
    prefix = _dataset_prefix(int(text))
    candidates: set[str] = set()
    for root in (roots.raw, roots.preprocessed, roots.results):
        if root is not None and root.is_dir():
            candidates.update(p.name for p in root.iterdir() if p.name.startswith(prefix))
    if not candidates:
        searched = [str(r) for r in (roots.raw, roots.preprocessed, roots.results) if r]
        msg = f"no dataset with id {int(text)} in {', '.join(searched) or '(no roots set)'}"
        raise ConfigurationError(msg)
    if len(candidates) > 1:
        msg = f"dataset id {int(text)} is ambiguous: {', '.join(sorted(candidates))}"
        raise ConfigurationError(msg)
    return candidates.pop()


def raw_dataset_dir(roots: Roots, dataset_name: str) -> Path:
    return roots.require_raw() / dataset_name


def preprocessed_dataset_dir(roots: Roots, dataset_name: str) -> Path:
    return roots.require_preprocessed() / dataset_name


def results_dataset_dir(roots: Roots, dataset_name: str) -> Path:
    return roots.require_results() / dataset_name
