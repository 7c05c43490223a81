"""The user trainers of a packed run travel in the reproduce archive, so a rerun finds them.

A reader's machine lacks the files the author's config names (``/home/me/t.py:MyTrainer``,
``mypkg.losses:MyTrainer``, or a class in ``$nnUNet_extTrainer``). ``pack_trainers`` copies the
source file of every user trainer the config names (``training.trainer`` and each
``methods[*].trainer``) into the archive as ``trainers/<file>.py`` (``<file>_2.py`` when two
files share a name) and names it ``trainers/<file>.py:ClassName`` in the packed config;
``unpack_trainers`` writes those files into the rerun's folder and names them by absolute path.
Built-in names stay as they are. The files are found, never imported (the pack runs no user
code). A module-form trainer is packed as its module's one file: a module that imports sibling
modules of its package is not covered (the docs ask for a self-contained trainer file).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import TRUST_FLAG, CarriedCode, require_consent
from nnunet_core.extension.trainer_code import trainer_class_name, trainer_source_path
from nnunet_core.io.atomic import atomic_path
from nnunet_core.layout.work import REPRODUCE_TRAINERS
from nnunet_core.training.trainer.lookup import check_trainer_name

PACKED_PREFIX = f"{REPRODUCE_TRAINERS}/"


def trainer_names(config: dict[str, Any]) -> list[str]:
    """Every trainer name the config gives, in order, each once."""
    names = [(config.get("training") or {}).get("trainer")]
    names += [method.get("trainer") for method in config.get("methods") or []]
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))


def _rename(config: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    """A copy of the config with each trainer name passed through ``rename``."""
    renamed = copy.deepcopy(config)
    training = renamed.get("training")
    if isinstance(training, dict) and isinstance(training.get("trainer"), str):
        training["trainer"] = rename(training["trainer"])
    for method in renamed.get("methods") or []:
        if isinstance(method.get("trainer"), str):
            method["trainer"] = rename(method["trainer"])
    return renamed


def _unique_member(source: Path, taken: set[str]) -> str:
    """``trainers/<file>.py``, or ``<file>_<n>.py`` when another file took that name."""
    stem, number = source.stem, 1
    while (member := f"{PACKED_PREFIX}{stem}{f'_{number}' if number > 1 else ''}.py") in taken:
        number += 1
    return member


def pack_trainers(
    config: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, bytes], list[dict[str, str]]]:
    """The config naming the packed copies, the archive members (name -> bytes) and one record
    per user trainer for the manifest (its name as given, packed name, original file, sha256)."""
    members: dict[str, bytes] = {}
    by_source: dict[Path, str] = {}
    packed: dict[str, str] = {}
    records = []
    for name in trainer_names(config):
        code = check_trainer_name(name)  # None: built in
        if code is None:
            continue
        source = trainer_source_path(code)
        try:
            data = source.read_bytes()
        except OSError as exc:
            msg = f"trainer {name!r}: {source}: cannot be read ({exc.strerror})"
            raise ConfigurationError(msg) from None
        if source not in by_source:
            by_source[source] = _unique_member(source, set(members))
            members[by_source[source]] = data
        packed[name] = f"{by_source[source]}:{code.class_name}"
        records.append(
            {
                "trainer": name,
                "packed": packed[name],
                "original_file": str(source),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    return _rename(config, lambda n: packed.get(n, n)), members, records


def packed_sha256(records: Any) -> dict[str, str]:
    """Each packed trainer file's sha256 from the manifest's ``trainers`` records."""
    digests = {}
    for record in records if isinstance(records, list) else []:
        if isinstance(record, dict) and isinstance(record.get("packed"), str):
            digests[record["packed"].rsplit(":", 1)[0]] = str(record.get("sha256", ""))
    return digests


def unpack_trainers(
    config: dict[str, Any],
    read_member: Callable[[str], bytes],
    into: Path,
    *,
    archive: Path,
    recorded: dict[str, str],
    trusted: bool,
) -> dict[str, Any]:
    """Write each packed trainer file the config names to ``into/trainers/`` (atomically) and
    return the config naming it by absolute path; other names are left as they are.

    The rerun runs these files, which the reader did not write: each must have the sha256 the
    archive's manifest records (``recorded``), and is written only with the reader's consent
    (``trusted``: ``--trust-model-code``), else one line naming the file and its sha256.
    """
    folder = (into / REPRODUCE_TRAINERS).resolve()
    written: set[str] = set()

    def absolute(name: str) -> str:
        if not name.startswith(PACKED_PREFIX):
            return name
        member = name.rsplit(":", 1)[0]
        target = folder / Path(member).name  # the file name only: nothing outside the folder
        if member not in written:
            data = read_member(member)
            digest = hashlib.sha256(data).hexdigest()
            if recorded.get(member) != digest:
                msg = (
                    f"{archive}: {member} has sha256 {digest}, but the manifest records "
                    f"{recorded.get(member) or 'none'}; nothing was unpacked"
                )
                raise ConfigurationError(msg)
            require_consent(
                CarriedCode(archive, Path(member), digest),
                trusted,
                TRUST_FLAG,
                carrier="archive",
                runs_when="the rerun",
                announce="trusting",
            )
            folder.mkdir(parents=True, exist_ok=True)
            with atomic_path(target, suffix=".py") as tmp:
                tmp.write_bytes(data)
            written.add(member)
        return f"{target}:{trainer_class_name(name)}"

    return _rename(config, absolute)
