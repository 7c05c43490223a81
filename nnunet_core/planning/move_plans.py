"""Plans of one dataset for another (upstream's ``nnUNetv2_move_plans_between_datasets``).

Used for pretraining: the target dataset is preprocessed and trained with the source's network
and spacing. As upstream (2.8.1) does, the copy gets the target's ``dataset_name``, the target
plans identifier as ``plans_name`` and the ``image_reader_writer`` the target's raw dataset needs
(its ``overwrite_image_reader_writer``, else chosen by file ending with the first training image
as example). With a different identifier each ``data_identifier`` is renamed to match:
``nnUNetPlans_3d_fullres`` -> ``<target>_3d_fullres``, any other ``X`` -> ``<target>_X``, so the
target's preprocessed data never overwrites data of the source identifier.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from nnunet_core.dataset.discovery import training_cases
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.atomic import read_json, write_json
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.readers.registry import reader_name
from nnunet_core.layout.preprocessed import plans_file
from nnunet_core.layout.raw import DATASET_JSON


def renamed_data_identifier(identifier: str, source_plans: str, target_plans: str) -> str:
    """Upstream's rule: swap the source identifier prefix, else prepend ``<target>_``."""
    if identifier.startswith(source_plans):
        return target_plans + identifier[len(source_plans) :]
    return f"{target_plans}_{identifier}"


def moved_plans(
    plans: dict[str, Any],
    target_dataset: str,
    source_plans: str,
    target_plans: str,
    reader: str,
) -> dict[str, Any]:
    """The source ``plans`` rewritten for the target dataset (the input is left as it is)."""
    moved = copy.deepcopy(plans)
    moved["dataset_name"] = target_dataset
    if target_plans != source_plans:
        for configuration in moved["configurations"].values():
            if isinstance(configuration, dict) and "data_identifier" in configuration:
                configuration["data_identifier"] = renamed_data_identifier(
                    str(configuration["data_identifier"]), source_plans, target_plans
                )
    moved["image_reader_writer"] = reader
    moved["plans_name"] = target_plans
    return moved


def _example_image(raw_dir: Path, dataset_json: DatasetJson) -> Path | None:
    """The first image of the first training case (upstream's example for the reader choice);
    an explicit ``dataset`` mapping is taken in file order, as upstream."""
    explicit = dataset_json.raw.get("dataset")
    if isinstance(explicit, dict) and explicit:
        images = next(iter(explicit.values())).get("images") or []
        return (raw_dir / images[0]) if images else None
    cases = training_cases(raw_dir, dataset_json)
    return cases[0].images[0] if cases and cases[0].images else None


def target_reader(raw_dir: Path) -> str:
    """The image reader/writer name the target raw dataset needs."""
    dataset_json = load_dataset_json(raw_dir / DATASET_JSON)
    return reader_name(
        dataset_json.raw, str(raw_dir / DATASET_JSON), _example_image(raw_dir, dataset_json)
    )


def read_source_plans(preprocessed_dir: Path, plans_name: str, dataset: str) -> dict[str, Any]:
    if not preprocessed_dir.is_dir():
        msg = (
            f"{preprocessed_dir}: no preprocessed folder for source dataset {dataset} "
            "(run `nnunet-core plan-and-preprocess` for it first)"
        )
        raise ConfigurationError(msg)
    path = plans_file(preprocessed_dir, plans_name)
    if not path.is_file():
        msg = f"{path}: source plans not found (run `nnunet-core plan` with -overwrite_plans_name?)"
        raise ConfigurationError(msg)
    try:
        plans = read_json(path)
    except ValueError as exc:
        msg = f"{path}: not valid JSON ({exc})"
        raise ConfigurationError(msg) from None
    if not isinstance(plans, dict) or not isinstance(plans.get("configurations"), dict):
        msg = f"{path}: not a plans file (no 'configurations' mapping)"
        raise ConfigurationError(msg)
    return plans


def move_plans(
    source_preprocessed: Path,
    target_preprocessed: Path,
    target_raw: Path,
    source_plans: str,
    target_plans: str | None = None,
) -> Path:
    """Write the source's plans for the target; returns the file written (atomically)."""
    target_plans = target_plans or source_plans
    plans = read_source_plans(source_preprocessed, source_plans, source_preprocessed.name)
    reader = target_reader(target_raw)
    moved = moved_plans(plans, target_raw.name, source_plans, target_plans, reader)
    target = plans_file(target_preprocessed, target_plans)
    write_json(target, moved)
    return target
