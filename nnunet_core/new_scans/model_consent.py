"""Whether the prediction mode may run the trainer code a model carries (``trainer_source/``).

A model of a user's trainer rebuilds its network from the copy of the trainer it carries, and a
model can come from anyone (a zip, a URL). Its code runs when the user consents
(``predict.trust_model_code: true``), or without asking when the model is the user's own: trained
in this ``work_dir`` (its results, not a zip installed there), or recording a trainer file that
still exists unchanged (same sha256) where it was trained from. Otherwise the refusal is one line
naming the file, its sha256 and how to consent (``extension.consent``), before any job starts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nnunet_core.extension.consent import file_sha256, require_consent, verified_code
from nnunet_core.extension.trainer_record import read_record
from nnunet_core.io.plans import Plans
from nnunet_core.layout.results import PLANS_JSON, TrainedModel
from nnunet_core.layout.work import WORK_RESULTS
from nnunet_core.new_scans.model_source import ScanModel

CONSENT = "predict.trust_model_code: true"
OWN_MODEL = "a model of your own: trained in this work_dir or from an unchanged file of yours"


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())


def own_model(model_dir: Path, record: dict, work_dir: Path) -> bool:
    """Trained in this work_dir, or its recorded trainer file is still there, unchanged."""
    if _inside(model_dir, work_dir / WORK_RESULTS):
        return True
    original = record.get("original_file")
    if not isinstance(original, str) or not Path(original).is_file():
        return False
    return file_sha256(Path(original)) == str(record.get("sha256", "")).lower()


def _model_dirs(model: ScanModel) -> list[Path]:
    """The members' folders and a cascade stage's previous stage (it is predicted first)."""
    folders = []
    for member in model.members:
        folders.append(member.model_dir)
        named = TrainedModel.from_identifier(member.model_dir.name)
        plans = Plans.load(member.model_dir / PLANS_JSON)
        previous = plans.configuration(named.configuration).previous_stage
        if previous is not None:
            sibling = dataclasses.replace(named, configuration=previous).identifier
            folders.append(member.model_dir.parent / sibling)
    return folders


def code_consent(model: ScanModel, work_dir: Path, consent: bool) -> str:
    """Why the members' carried code may run (said in the job's log line naming the file), when
    it may; a member whose code may not run is refused in one line (a ConfigurationError). The
    copy must match its record's sha256 with or without consent."""
    own = 0
    for model_dir in _model_dirs(model):
        record = read_record(model_dir)
        if record is None:
            continue
        carried = verified_code(model_dir, record)
        if consent:
            continue
        if own_model(model_dir, record, work_dir):
            own += 1
            continue
        require_consent(carried, False, CONSENT)
    return CONSENT if consent or not own else OWN_MODEL
