"""Whether the prediction mode may run the trainer code a model carries (``trainer_source/``).

A model of a user's trainer rebuilds its network from the copy of the trainer it carries, and a
model can come from anyone (a zip, a URL). Its code runs when the user consents
(``predict.trust_model_code: true``), or without asking when the model is the user's own: trained
in this ``work_dir`` (its results, not a zip installed there), or recording a trainer file that
still exists unchanged (same sha256) where it was trained from. Otherwise the refusal is one line
naming the file, its sha256 and how to consent (``extension.consent``), before any job starts.
"""

from __future__ import annotations

from pathlib import Path

from nnunet_core.extension.consent import file_sha256, require_consent, verified_code
from nnunet_core.extension.trainer_record import read_record
from nnunet_core.layout.work import WORK_RESULTS
from nnunet_core.new_scans.model_source import ScanModel

CONSENT = "predict.trust_model_code: true"


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


def trusted_model(model: ScanModel, work_dir: Path, consent: bool) -> bool:
    """True when every member's carried code may run (or none carries code); a member whose code
    may not run is refused in one line (a ConfigurationError). The copy must match its record's
    sha256 with or without consent."""
    for member in model.members:
        record = read_record(member.model_dir)
        if record is None:
            continue
        carried = verified_code(member.model_dir, record)
        if consent or own_model(member.model_dir, record, work_dir):
            continue
        require_consent(carried, False, CONSENT)
    return True
