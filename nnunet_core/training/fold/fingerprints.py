"""sha256 of what a fold reads from files: a user trainer's source, pretrained weights, the plans
and its split. The same functions serve the train command (recorded in ``provenance.json``) and
the workflow's main process (compared before any job, and a train rule's rerun trigger), so the
two never hash the same thing two ways. No torch: the workflow imports this while parsing.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnunet_core.extension.trainer_code import trainer_source_path
from nnunet_core.training.fold.settings_table import json_sha256
from nnunet_core.training.trainer.lookup import check_trainer_name

_HASHED: dict[tuple[str, int, int], str] = {}  # (file, size, mtime) -> sha256


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes; computed once per file version in a process (pretrained
    weights can be gigabytes, and the workflow and the train command both ask)."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    version = (str(resolved), stat.st_size, stat.st_mtime_ns)
    if version not in _HASHED:
        digest = hashlib.sha256()
        with open(resolved, "rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
        _HASHED[version] = digest.hexdigest()
    return _HASHED[version]


def trainer_source_sha256(trainer: str) -> str | None:
    """sha256 of the file that defines a user's trainer class; None for a built-in trainer."""
    code = check_trainer_name(trainer)
    return None if code is None else file_sha256(trainer_source_path(code))


def plans_sha256(plans: Any) -> str:
    """sha256 of the plans' content (the JSON object as read; provenance's ``plans_sha256``)."""
    return json_sha256(plans)


def splits_sha256(train: Sequence[str], val: Sequence[str]) -> str:
    """sha256 of one fold's training and validation case lists, in their order."""
    return json_sha256({"train": list(train), "val": list(val)})
