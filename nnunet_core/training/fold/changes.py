"""What changed since a fold was trained, and starting it over when that invalidates it.

A fold's ``provenance.json`` records under ``settings`` the values of the table's settings
(``training.fold.settings_table``) it was trained with. A run whose values differ in an invalidating
setting must not continue that fold's checkpoint (upstream's ``--c`` would, and the fold would
then claim settings it was not trained with): the train command sets the old folder aside,
renamed, never deleted, and trains the fold from the start. A change of a setting that does not
invalidate (``save_every``, workers, device, ...) continues, and the provenance records the new
value. The workflow's main process compares the same way before any job (``workflow.fold_reuse``)
to say so on the console, where a job's own lines (its log) are not seen.

A value one side cannot know (the workflow before the plans exist, a fold recorded before this
table) is left out of that side's dict and not compared.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nnunet_core.io.atomic import read_json
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.results import (
    CHECKPOINT_BEST,
    CHECKPOINT_FINAL,
    CHECKPOINT_LATEST,
    FOLD_LOCK_NAME,
    fold_folder_name,
)
from nnunet_core.training.fold.fingerprints import (
    file_sha256,
    plans_sha256,
    splits_sha256,
    trainer_source_sha256,
)
from nnunet_core.training.fold.lock import FoldLock
from nnunet_core.training.fold.settings_table import BY_KEY, SETTINGS

if TYPE_CHECKING:
    from nnunet_core.training.fold.run import FoldRequest
    from nnunet_core.training.fold.setup import FoldSetup

PROVENANCE_JSON = "provenance.json"  # provenance.PROVENANCE_JSON (that module loads torch)
SETTINGS_KEY = "settings"  # where provenance.json keeps them
REPLACED_PREFIX = "replaced-"  # never fold_*: every fold_* folder is read as a fold
CHECKPOINTS = (CHECKPOINT_FINAL, CHECKPOINT_LATEST, CHECKPOINT_BEST)


@dataclass(frozen=True)
class Change:
    key: str
    old: Any
    new: Any
    invalidates: bool

    def describe(self) -> str:
        return f"{self.key} changed {_shown(self.old)} -> {_shown(self.new)}"


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and value.isalnum():
        return value[:12]  # a sha256
    return json.dumps(value)


def _plain(value: Any) -> Any:
    """A value as provenance.json gives it back (tuples become lists, ...)."""
    return json.loads(json.dumps(value))


def changes(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[Change]:
    """Every table setting both sides know whose values differ, in the table's order."""
    found = []
    for row in SETTINGS:
        if row.key in recorded and row.key in current:
            old, new = _plain(recorded[row.key]), _plain(current[row.key])
            if old != new:
                found.append(Change(row.key, old, new, row.invalidates))
    return found


def describe(found: list[Change]) -> str:
    return ", ".join(change.describe() for change in found)


def recorded_settings(fold_folder: Path) -> dict[str, Any] | None:
    """The settings a fold's provenance.json records; None when there are none (no file, an
    unreadable one, or a fold recorded before the table)."""
    path = fold_folder / PROVENANCE_JSON
    try:
        record = read_json(path) if path.is_file() else None
    except (OSError, ValueError):
        return None
    settings = record.get(SETTINGS_KEY) if isinstance(record, dict) else None
    return settings if isinstance(settings, dict) else None


def has_trained_state(fold_folder: Path) -> bool:
    return any((fold_folder / name).is_file() for name in CHECKPOINTS)


def replaced_folder(fold_folder: Path, fold: int | str, when: datetime | None = None) -> Path:
    """Where a fold folder is kept aside: ``replaced-fold_0-20261207T053012`` beside it."""
    stamp = (when or datetime.now()).strftime("%Y%m%dT%H%M%S")
    name = f"{REPLACED_PREFIX}{fold_folder_name(fold)}-{stamp}"
    candidate, n = fold_folder.parent / name, 1
    while candidate.exists():
        n += 1
        candidate = fold_folder.parent / f"{name}-{n}"
    return candidate


# ------------------------------------------------------------------------------- the job's side
def settings_of_fold(request: FoldRequest, setup: FoldSetup) -> dict[str, Any]:
    """The values of every table setting this train command runs the fold with."""
    settings, flags, arguments = request.settings, request.flags, request.arguments
    values: dict[str, Any] = {
        row.key: getattr(settings, row.attribute) for row in SETTINGS if row.attribute
    }
    values["optimizer"] = asdict(settings.optimizer)
    pretrained = flags.pretrained_weights
    values.update(
        {
            "deterministic": flags.deterministic,
            "configuration": request.configuration,
            "fold": str(request.fold),
            "plans_name": request.plans,
            "plans_sha256": plans_sha256(setup.plans.raw),
            "splits_sha256": splits_sha256(setup.train_keys, setup.val_keys),
            "trainer_source_sha256": trainer_source_sha256(settings.trainer_name),
            "training.pretrained_weights": str(Path(pretrained).absolute()) if pretrained else None,
            "training.device": arguments.get("device") or BY_KEY["training.device"].default,
            "training.npz": flags.npz,
            "training.stop_margin": flags.stop_margin,
            "training.gpu_lock_dir": arguments.get("gpu_lock_dir"),
            "training.gpus_per_job": arguments.get("num_gpus"),
            "deadline": flags.deadline,
        }
    )
    if not pretrained:
        values["pretrained_weights_sha256"] = None
    elif Path(pretrained).is_file():  # gone since the fold began from it: not compared
        values["pretrained_weights_sha256"] = file_sha256(pretrained)
    return _plain(values)


def start_over_if_changed(
    request: FoldRequest, setup: FoldSetup, lock: FoldLock | None
) -> FoldLock | None:
    """Before a continued fold (``--c``) loads anything: when its folder holds a checkpoint and
    its recorded settings differ in an invalidating one, rename the folder aside, say so in one
    stderr line (the job's log) and return the lock of the new, empty folder; else ``lock``.
    Every DDP rank calls it: the others wait until the main one decided."""
    if lock is not None and request.flags.resume and not request.flags.validate_only:
        lock = _start_over(request, setup, lock)
    if request.topology.distributed:
        from nnunet_core.training.distributed import barrier

        barrier()  # no rank looks for a checkpoint before the old folder is aside
    return lock


def _start_over(request: FoldRequest, setup: FoldSetup, lock: FoldLock) -> FoldLock:
    folder = setup.output_folder
    recorded = recorded_settings(folder)
    if recorded is None or not has_trained_state(folder):
        return lock
    found = changes(recorded, settings_of_fold(request, setup))
    invalidating = [c for c in found if c.invalidates]
    where = f"{request.dataset} {request.configuration} fold {request.fold}"
    if not invalidating:
        if found:
            _say(f"{where} continues ({describe(found)}: these do not invalidate a fold)")
        return lock
    aside = replaced_folder(folder, request.fold)
    folder.rename(aside)  # the held lock's file moves along and stays locked
    remove_file(aside / FOLD_LOCK_NAME, inside=[aside])  # still ours: nobody waits on it
    folder.mkdir()
    fresh = FoldLock(folder)
    fresh.acquire()
    lock.release()  # its path names the new folder's file now: never release(remove=True)
    _say(f"{where} starts over: {describe(invalidating)}; its earlier folder is kept as {aside}")
    return fresh


def _say(line: str) -> None:
    print(f"nnunet-core train: {line}", file=sys.stderr, flush=True)
