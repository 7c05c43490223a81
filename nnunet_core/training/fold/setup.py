"""Everything one fold needs before training: plans, data folder, split and output folder.

Shared by the ``train`` command and the tests that build a trainer in-process.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nnunet_core.errors import ConfigurationError
from nnunet_core.inference.cascade_input import num_input_channels
from nnunet_core.io.atomic import atomic_path, read_json, write_json
from nnunet_core.io.dataset_json import LabelSpec, load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.preprocessed import FINGERPRINT_JSON, GT_FOLDER, SPLITS_JSON, plans_file
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import PLANS_JSON, TrainedModel, fold_dir, trained_model_dir
from nnunet_core.layout.roots import Roots, preprocessed_dataset_dir, results_dataset_dir
from nnunet_core.planning.splits import DEFAULT_SEED, kfold_splits
from nnunet_core.training.fold.previous_stage import check_previous_stage, previous_stage_folder


@dataclass(frozen=True)
class FoldSetup:
    """Everything a fold's training reads, resolved from the command line and the plans."""

    plans: Plans
    configuration_name: str
    configuration: Configuration
    dataset_json: dict[str, Any]
    label_spec: LabelSpec
    num_input_channels: int  # image channels (+ one-hot previous stage for a cascade stage)
    fold: int | str
    data_folder: Path  # preprocessed/D/<data_identifier>
    gt_folder: Path  # preprocessed/D/gt_segmentations
    output_folder: Path  # results/D/<trainer>__<plans>__<config>/fold_k
    train_keys: list[str]
    val_keys: list[str]
    # a cascade stage's previous-stage segmentations (<case>.b2nd); None for other configurations
    previous_stage_folder: Path | None = None


# Opt-in to upstream's random 80:20 split for a fold beyond splits_final.json (any value but
# "", "0", "false", "no").
RANDOM_SPLIT_ENV = "nnUNet_random_split_beyond_folds"


def random_split_beyond_folds() -> bool:
    return os.environ.get(RANDOM_SPLIT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def fold_keys(
    preprocessed_dir: Path, fold: int | str, case_ids: list[str]
) -> tuple[list[str], list[str]]:
    """(train, val) case ids of a fold; ``splits_final.json`` is created if missing (upstream).

    'all' trains and validates on every case. A fold beyond the splits is an error naming the
    file and its fold count, checked before the file is written; upstream instead trains it on
    a random 80:20 split seeded with 12345 + fold, which ``nnUNet_random_split_beyond_folds=1``
    restores.
    """
    if fold == "all":
        return list(case_ids), list(case_ids)
    path = preprocessed_dir / SPLITS_JSON
    exists = path.is_file()
    splits = read_json(path) if exists else kfold_splits(case_ids)
    if int(fold) < len(splits):
        train, val = list(splits[int(fold)]["train"]), list(splits[int(fold)]["val"])
    elif random_split_beyond_folds():
        keys = sorted(case_ids)
        rng = np.random.RandomState(DEFAULT_SEED + int(fold))
        chosen = set(rng.choice(len(keys), int(len(keys) * 0.8), replace=False).tolist())
        train = [k for i, k in enumerate(keys) if i in chosen]
        val = [k for i, k in enumerate(keys) if i not in chosen]
    else:
        state = "has" if exists else "(not written yet) would have"
        msg = (
            f"fold {fold} does not exist: {path} {state} {len(splits)} folds, 0-{len(splits) - 1}"
            f" (or 'all'); {RANDOM_SPLIT_ENV}=1 trains it on upstream's random 80:20 split"
        )
        raise ConfigurationError(msg)
    if not exists:
        write_json(path, splits)  # deterministic content: concurrent folds write the same
    missing = sorted(set(train + val) - set(case_ids))
    if missing:
        msg = (
            f"{path}: fold {fold} names case(s) that are not preprocessed: {', '.join(missing[:5])}"
        )
        raise ConfigurationError(msg)
    if not train or not val:
        msg = f"{path}: fold {fold} has {len(train)} training and {len(val)} validation cases"
        raise ConfigurationError(msg)
    return train, val


def prepare_fold(
    roots: Roots,
    dataset_name: str,
    configuration: str,
    fold: int | str,
    plans_name: str,
    trainer: str,
) -> FoldSetup:
    """Resolve plans, dataset.json, data folder, split and output folder of one fold; a cascade
    stage's previous-stage files are checked here, before anything is written."""
    from nnunet_core.training.data.case_store import list_case_ids

    pre = preprocessed_dataset_dir(roots, dataset_name)
    plans = Plans.load(plans_file(pre, plans_name))
    resolved = plans.configuration(configuration)
    dataset_json = load_dataset_json(pre / DATASET_JSON)
    data_folder = pre / resolved.data_identifier
    if not data_folder.is_dir():
        msg = (
            f"{data_folder}: not preprocessed (run `nnunet-core preprocess -d {dataset_name} -c "
            f"{configuration}`)"
        )
        raise ConfigurationError(msg)
    train, val = fold_keys(pre, fold, list_case_ids(data_folder))
    results_dir = results_dataset_dir(roots, dataset_name)
    model_dir = trained_model_dir(results_dir, configuration, plans_name, trainer)
    previous = previous_stage_folder(results_dir, resolved, plans_name, trainer)
    if resolved.previous_stage is not None and previous is not None:
        producer = TrainedModel(resolved.previous_stage, plans_name, trainer)
        check_previous_stage(previous, train + val, pre / SPLITS_JSON, producer, dataset_name, fold)
    return FoldSetup(
        plans=plans,
        configuration_name=configuration,
        configuration=resolved,
        dataset_json=dataset_json.raw,
        label_spec=dataset_json.label_spec,
        num_input_channels=num_input_channels(
            resolved, dataset_json.num_channels, dataset_json.label_spec
        ),
        fold=fold,
        data_folder=data_folder,
        gt_folder=pre / GT_FOLDER,
        output_folder=fold_dir(model_dir, fold),
        train_keys=train,
        val_keys=val,
        previous_stage_folder=previous,
    )


def copy_model_files(preprocessed_dir: Path, model_dir: Path, plans_name: str) -> None:
    """plans.json, dataset.json and dataset_fingerprint.json next to the folds (for inference)."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for source, name in (
        (plans_file(preprocessed_dir, plans_name), PLANS_JSON),
        (preprocessed_dir / DATASET_JSON, DATASET_JSON),
        (preprocessed_dir / FINGERPRINT_JSON, FINGERPRINT_JSON),
    ):
        if source.is_file():
            with atomic_path(model_dir / name, suffix=".json") as tmp:
                shutil.copyfile(source, tmp)
