"""Reading upstream-format ``summary.json`` data and naming what it scores (shared helpers).

Dice keys are upstream's (``"1"``, regions ``"(1, 2)"``); candidates are model folder names
``Trainer__Plans__Config`` or ensemble folder names ``ensemble___A___B___0_1_2_3_4``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nnunet_core.errors import NnunetCoreError
from nnunet_core.layout.results import TrainedModel, ensemble_member_names, is_model_folder_name

FOREGROUND = "foreground mean"


class ReportInputError(NnunetCoreError):
    """A file the report cannot do without is missing or unreadable (names it and its command)."""


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"{path}: unreadable ({type(exc).__name__}: {exc})"
        raise ReportInputError(msg) from None


def configuration_of(identifier: str) -> str:
    """``nnUNetTrainer__nnUNetPlans__3d_fullres`` -> ``3d_fullres``."""
    if not is_model_folder_name(identifier):
        return identifier
    return TrainedModel.from_identifier(identifier).configuration


def ensemble_members(identifier: str) -> list[str]:
    """``ensemble___A___B___0_1_2_3_4`` -> ``[A, B]``."""
    return ensemble_member_names(identifier)


def short_names(identifiers: list[str]) -> dict[str, str]:
    """Readable candidate labels: the configuration, or the full name where that is ambiguous."""
    models = {m for i in identifiers for m in (ensemble_members(i) or [i])}
    configs = [configuration_of(m) for m in models]
    unique = {
        m: configuration_of(m) if configs.count(configuration_of(m)) == 1 else m for m in models
    }
    return {
        i: " + ".join(unique[m] for m in ensemble_members(i)) if ensemble_members(i) else unique[i]
        for i in identifiers
    }


def dice_of(value: Any) -> float:
    try:
        return float(value["Dice"] if isinstance(value, dict) else value)
    except (KeyError, TypeError, ValueError):
        return math.nan


def per_class_rows(mean: dict[str, Any], names: dict[str, str], **extra: Any) -> list[dict]:
    keys = list(names) + [k for k in mean if k not in names]
    return [
        {**extra, "label_key": k, "name": names.get(k, k), "dice": dice_of(mean[k])}
        for k in keys
        if k in mean
    ]


def case_name(entry: dict[str, Any]) -> str:
    """The case of a ``metric_per_case`` entry: its reference (else prediction) file name."""
    return Path(entry.get("reference_file") or entry.get("prediction_file", "?")).name
