"""A model folder's record of its user trainer: how it was named and found, and its source.

Training writes ``trainer.json`` and a copy of the trainer's source file into the model folder
(next to ``plans.json``); ``predict`` loads the class from that copy, never from the original
file, so a model folder (or its exported zip) predicts the same on a machine that never had the
user's file. A built-in trainer writes no record (its network is ours). The copy runs only with
the user's consent and while its sha256 is the recorded one (``extension.consent``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import TRUST_FLAG, require_consent, verified_code
from nnunet_core.extension.trainer_code import TrainerCode, load_class, source_file
from nnunet_core.io.atomic import atomic_path, write_json
from nnunet_core.layout.results import TRAINER_JSON, TRAINER_SOURCE_FOLDER


def write_record(model_dir: Path, code: TrainerCode, cls: type) -> None:
    """``trainer.json`` and ``trainer_source/<file>.py`` (atomic: parallel folds write the same)."""
    source = source_file(cls)
    if source is None or not source.is_file():
        msg = f"trainer {code.name!r}: the source file of class {cls.__name__} is not found"
        raise ConfigurationError(msg)
    folder = model_dir / TRAINER_SOURCE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_path(folder / source.name, suffix=".py") as tmp:
        shutil.copyfile(source, tmp)
    record = {
        "trainer": code.name,
        "class": code.class_name,
        "found_by": code.found_by,
        "module": code.module,
        "original_file": str(source),
        "source": f"{TRAINER_SOURCE_FOLDER}/{source.name}",
        "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
    }
    write_json(model_dir / TRAINER_JSON, record)


def read_record(model_dir: Path) -> dict[str, Any] | None:
    """The folder's record; None for a model of a built-in trainer."""
    path = model_dir / TRAINER_JSON
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return {"path": path, **record, "class": str(record["class"])}
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"{path}: not a trainer record ({exc})"
        raise ConfigurationError(msg) from None


def load_recorded_class(
    model_dir: Path, *, trusted: bool = False, how: str = TRUST_FLAG
) -> type | None:
    """The trainer class from the folder's copy of its source; None for a built-in trainer.

    The copy runs only when ``trusted`` (the user's consent, given as ``how``) and when its
    sha256 is the record's; otherwise a one-line ConfigurationError and nothing runs.
    """
    record = read_record(model_dir)
    if record is None:
        return None
    carried = verified_code(model_dir, record)
    require_consent(carried, trusted, how)
    code = TrainerCode(str(record.get("trainer", record["class"])), record["class"], "copy")
    return load_class(code, carried.source, sha256=carried.sha256)
