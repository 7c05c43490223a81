"""Consent before a model folder's carried trainer code runs: the one place that decides it.

A model trained by a user's trainer carries ``trainer.json`` and a copy of the trainer's source
(``trainer_source/<file>.py``); rebuilding its network means executing that file. A model folder
is data that anyone can hand over (a zip, a shared folder), so its code runs only when the user
says so: ``--trust-model-code`` on the command line (``trust_model_code`` in a workflow config,
``TRUST_CONFIG_KEY``). Without consent the refusal is one line naming the folder, the file, its
sha256 and how to consent; with it one line on stderr names the file and its sha256 before it
runs. The copy must still be the file the record was written for (its sha256), else it was
changed after training and is refused with or without consent.

Nothing here imports torch or the trainer: the install command and the workflow use it too.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.results import TRAINER_JSON, TRAINER_SOURCE_FOLDER

TRUST_FLAG = "--trust-model-code"
TRUST_CONFIG_KEY = "trust_model_code"


@dataclass(frozen=True)
class CarriedCode:
    """A model folder's trainer source whose sha256 matches its record (checked)."""

    model_dir: Path
    source: Path
    sha256: str

    def describe(self) -> str:
        return f"{self.source} (sha256 {self.sha256})"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def recorded_source(model_dir: Path, record: Mapping[str, Any]) -> Path:
    """The copy the record names, always inside ``<model_dir>/trainer_source`` (no ``../``)."""
    name = record.get("source")
    if not isinstance(name, str) or not Path(name).name.endswith(".py"):
        msg = f"{model_dir / TRAINER_JSON}: names no trainer source file ({name!r})"
        raise ConfigurationError(msg)
    return model_dir / TRAINER_SOURCE_FOLDER / Path(name).name


def verified_code(
    model_dir: Path, record: Mapping[str, Any], source: Path | None = None
) -> CarriedCode:
    """The record's source (``source``: read that file instead, e.g. an archive's unpacked copy)
    with its sha256 checked against the record's; a missing file, a record without a sha256 or a
    differing one (the copy was changed after training) is a one-line ConfigurationError."""
    named = recorded_source(model_dir, record)
    source = source or named
    recorded = record.get("sha256")
    if not source.is_file():
        msg = f"{model_dir}: its trainer record names {named}, which is missing"
        raise ConfigurationError(msg)
    if not isinstance(recorded, str) or not recorded:
        msg = f"{model_dir / TRAINER_JSON}: records no sha256 of {named}; its code is not run"
        raise ConfigurationError(msg)
    actual = file_sha256(source)
    if actual != recorded.lower():
        msg = (
            f"{model_dir}: {named} has sha256 {actual} but its record says {recorded}: the code "
            "was changed after training; it is not run"
        )
        raise ConfigurationError(msg)
    return CarriedCode(model_dir, named, actual)


def require_consent(
    code: CarriedCode,
    trusted: bool,
    how: str = TRUST_FLAG,
    stream: TextIO | None = None,
    *,
    carrier: str = "model",
    runs_when: str = "predicting",
    announce: str = "running",
) -> None:
    """Refuse in one line unless ``trusted``; else say on stderr which code runs.

    ``how`` names the consent in the refusal: the flag, or the config key for the workflow.
    ``carrier`` and ``runs_when`` say what carries the code (a model folder, a reproduce archive)
    and what would run it; ``announce`` begins the line said on consent.
    """
    if not trusted:
        msg = (
            f"{carrier} {code.model_dir} carries trainer code {code.describe()}, which "
            f"{runs_when} runs: pass {how} if you trust it"
        )
        raise ConfigurationError(msg)
    print(
        f"{announce} the trainer code carried by {carrier} {code.model_dir}: {code.describe()} "
        f"({how} given)",
        file=stream or sys.stderr,
        flush=True,
    )
