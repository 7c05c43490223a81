"""Where a cascade stage's fold finds its previous stage's segmentations, checked before training.

A cascade stage (``3d_cascade_fullres``) trains and validates on the 3d_lowres folds' validation
predictions (``training.fold.next_stage``), one file per case. A case without its file would fail in
a loader worker mid-epoch, so every training and validation case is checked first, and a missing
file is one line naming the case and the 3d_lowres fold whose validation writes it (the fold whose
validation split in ``splits_final.json`` holds the case).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import read_json
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.results import NEXT_STAGE_SUFFIX, TrainedModel, previous_stage_dir


def previous_stage_folder(
    results_dir: Path,
    configuration: Configuration,
    plans_name: str,
    trainer: str,
) -> Path | None:
    """``<trainer>__<plans>__<previous>/predicted_next_stage/<configuration>``; None when the
    configuration is no cascade stage (upstream: same trainer and plans)."""
    previous = configuration.previous_stage
    if previous is None:
        return None
    return previous_stage_dir(results_dir, previous, configuration.name, plans_name, trainer)


def source_fold(splits: Sequence[dict[str, Any]], case_id: str) -> int | None:
    """The cross-validation fold that validates ``case_id`` (it writes the case's file)."""
    for fold, split in enumerate(splits):
        if case_id in split.get("val", ()):
            return fold
    return None


def check_previous_stage(
    folder: Path,
    case_ids: Sequence[str],
    splits_file: Path,
    previous_model: TrainedModel,
    dataset: str,
    fold: int | str,
) -> None:
    """Every case has its previous-stage file; else one ConfigurationError line (exit 2)."""
    unique = dict.fromkeys(case_ids)  # training and validation keys overlap for fold 'all'
    missing = [c for c in unique if not (folder / f"{c}{NEXT_STAGE_SUFFIX}").is_file()]
    if not missing:
        return
    splits = read_json(splits_file) if splits_file.is_file() else []
    sources = [source_fold(splits, c) for c in missing]
    first, source = missing[0], sources[0]
    where = f"{previous_model.configuration} fold {source}"
    if source is None:
        producer = f"no {previous_model.configuration} fold of {splits_file} validates it"
    else:
        producer = (
            f"{where} writes it in its final validation "
            f"(`{previous_model.train_command(dataset, source)}`)"
        )
    more = ""
    if len(missing) > 1:
        folds = sorted({str(s) for s in sources[1:]})
        more = f"; {len(missing) - 1} more case(s) missing, from fold(s) {', '.join(folds)}"
    msg = (
        f"fold {fold} is a cascade stage and case {first} has no previous-stage segmentation "
        f"{folder / (first + NEXT_STAGE_SUFFIX)}: {producer}{more}"
    )
    raise ConfigurationError(msg)
