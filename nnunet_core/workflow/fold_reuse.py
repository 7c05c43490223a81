"""Before any job: which trained folds this run's settings invalidate, said on the console.

A fold job's own lines go to its log, which nobody reads on the console; so the main Snakemake
process compares each existing fold's recorded settings (its ``provenance.json``) with the run's,
computed from the config through the same table (``training.fold.settings_table``) and hashed by the
same functions (``training.fold.fingerprints``), and prints one line per fold that will start
over. It moves nothing (a dry run prints the same): the train job sets the folder aside when it
starts (``training.fold.changes``).

It also builds the train rule's rerun trigger: Snakemake reruns a job whose params changed, and
the train rule's only declared output is the fold's validation summary, so a finished fold is
trained again only when this param (the invalidating settings the config decides, with the
sha256 of a user trainer's source and of the pretrained weights) changes; the plans and the
split are the rule's inputs, the configuration and fold its wildcards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nnunet_core.io.atomic import read_json
from nnunet_core.layout.results import TrainedModel, fold_dir, model_dirs_of
from nnunet_core.training.fold import changes as fold_changes
from nnunet_core.training.fold.fingerprints import (
    file_sha256,
    plans_sha256,
    splits_sha256,
    trainer_source_sha256,
)
from nnunet_core.training.fold.settings_table import INVALIDATING, config_value, rerun_trigger
from nnunet_core.workflow.pretrained import PretrainedWeights

# the config's invalidating keys, as the train rule passes them (--epochs ..., -tr, --seed)
_CONFIG_KEYS = tuple(k for k in INVALIDATING if k.startswith("training.") or k == "seed")


def config_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The invalidating settings every fold of the run gets from the config itself."""
    values = {key: config_value(config, key) for key in _CONFIG_KEYS}
    values["deterministic"] = bool(config.get("deterministic", False))
    values["trainer_source_sha256"] = trainer_source_sha256(config["training"]["trainer"])
    return values


def train_rerun_trigger(config: Mapping[str, Any], pretrained: PretrainedWeights | None) -> str:
    """The train rule's rerun trigger: the config's invalidating settings, the sha256 of the
    pretrained weights' source (the zip a checkpoint is extracted from, else the file) and
    ``training.npz`` (a finished fold's job must run again to export the probabilities; it
    trains nothing). Settings that neither invalidate nor change the job's outputs are not in
    it, so changing them (save_every, workers, device) reruns no finished fold."""
    values = config_settings(config)
    if pretrained is None:
        values["pretrained_weights_sha256"] = None
    else:
        source = pretrained.archive or pretrained.checkpoint
        values["pretrained_weights_sha256"] = file_sha256(source) if source.is_file() else None
    trigger = rerun_trigger(values)
    return f"{trigger} training.npz={str(bool(config['training']['npz'])).lower()}"


def fold_settings_from_config(
    config: Mapping[str, Any],
    *,
    configuration: str,
    fold: int | str,
    plans_name: str,
    plans_file: Path,
    splits_file: Path,
    pretrained: PretrainedWeights | None,
) -> dict[str, Any]:
    """The invalidating settings a fold job of this run will record, as far as they are known
    before any job: the plans and split only where their files exist, the pretrained weights'
    sha256 only where the checkpoint is the user's file (a zip's is extracted by a job)."""
    values = config_settings(config)
    values.update(configuration=configuration, fold=str(fold), plans_name=plans_name)
    if plans_file.is_file():
        values["plans_sha256"] = plans_sha256(read_json(plans_file))
    if splits_file.is_file() and str(fold).isdigit():
        splits = read_json(splits_file)
        if isinstance(splits, list) and int(fold) < len(splits):
            entry = splits[int(fold)]
            values["splits_sha256"] = splits_sha256(entry["train"], entry["val"])
    if pretrained is None:
        values["pretrained_weights_sha256"] = None
    elif pretrained.archive is None and pretrained.checkpoint.is_file():
        values["pretrained_weights_sha256"] = file_sha256(pretrained.checkpoint)
    return values


def fold_restart_lines(
    config: Mapping[str, Any],
    *,
    dataset: str,
    results: Path,
    trainer: str,
    plans_name: str,
    folds: Sequence[int | str],
    plans_file: Path,
    splits_file: Path,
    pretrained: PretrainedWeights | None,
) -> list[str]:
    """One line per trained fold of this run (a fold folder with a checkpoint and recorded
    settings) that the run's settings invalidate, naming the fold and the changed keys."""
    lines = []
    for model in model_dirs_of(results, trainer, plans_name):
        configuration = TrainedModel.from_identifier(model.name).configuration
        for fold in folds:
            folder = fold_dir(model, fold)
            recorded = fold_changes.recorded_settings(folder)
            if recorded is None or not fold_changes.has_trained_state(folder):
                continue
            current = fold_settings_from_config(
                config,
                configuration=configuration,
                fold=fold,
                plans_name=plans_name,
                plans_file=plans_file,
                splits_file=splits_file,
                pretrained=pretrained,
            )
            changed = [c for c in fold_changes.changes(recorded, current) if c.invalidates]
            if changed:
                aside = fold_changes.replaced_folder(folder, fold).name.rsplit("-", 1)[0]
                lines.append(
                    f"{dataset} {configuration} fold {fold} starts over: "
                    f"{fold_changes.describe(changed)} (its folder is kept as {aside}-<time> "
                    "when the job starts)"
                )
    return lines
