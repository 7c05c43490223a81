"""A trained model folder: its plans, dataset.json and one network per fold's checkpoint.

``results/D/<trainer>__<plans>__<configuration>/`` holds ``plans.json``, ``dataset.json`` and
``fold_k/checkpoint_final.pth`` (training copies the JSON files there). Errors name the missing
file and the ``nnunet-core train`` call that produces it. A user's trainer's folder also holds
its record (``trainer.json`` and a copy of its source), from which its network is rebuilt: that
code runs only with the user's consent (``trust_model_code``, see ``extension.consent``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from nnunet_core.errors import ConfigurationError
from nnunet_core.extension.consent import TRUST_FLAG
from nnunet_core.extension.trainer_record import load_recorded_class, read_record
from nnunet_core.inference.cascade_input import num_input_channels
from nnunet_core.io.dataset_json import DatasetJson, load_dataset_json
from nnunet_core.io.plans import Plans
from nnunet_core.io.plans_configuration import Configuration
from nnunet_core.layout.raw import DATASET_JSON
from nnunet_core.layout.results import (
    PLANS_JSON,
    TrainedModel,
    available_folds,
    fold_dir,
)
from nnunet_core.model import build_network
from nnunet_core.model import checkpoint as ckpt

Fold = int | str


@dataclass(frozen=True)
class LoadedModel:
    """A model folder's plans, dataset.json and one network per fold (on the CPU, eval mode)."""

    folder: Path
    plans: Plans
    configuration_name: str
    configuration: Configuration
    dataset_json: DatasetJson
    folds: tuple[Fold, ...]
    networks: tuple[nn.Module, ...]
    mirror_axes: tuple[int, ...] | None  # None: the checkpoint allows no mirroring
    trainer_name: str

    @property
    def patch_size(self) -> list[int]:
        return list(self.configuration.patch_size)

    @property
    def num_outputs(self) -> int:
        return self.dataset_json.label_spec.num_segmentation_heads

    @property
    def previous_stage(self) -> str | None:
        """The configuration whose predictions a cascade stage reads; None for other models."""
        return self.configuration.previous_stage

    def sibling(self, configuration: str) -> Path:
        """The model folder of ``configuration`` with this model's trainer and plans (where
        training puts it: ``<trainer>__<plans>__<configuration>`` next to this folder)."""
        plans_name = self.plans.name
        if self.trainer_name and plans_name:
            model = TrainedModel(configuration, plans_name, self.trainer_name)
        else:
            named = TrainedModel.from_identifier(self.folder.name)
            model = dataclasses.replace(named, configuration=configuration)
        return self.folder.parent / model.identifier


def train_command(model_dir: Path, fold: Fold) -> str:
    """The ``nnunet-core train`` call that produces ``fold``'s checkpoints in ``model_dir``."""
    try:
        model = TrainedModel.from_identifier(model_dir.name)
        record = read_record(model_dir)  # a user's trainer: named as it was at training
    except ConfigurationError:
        return f"nnunet-core train {model_dir.parent.name} CONFIGURATION {fold}"
    if record is not None:
        model = dataclasses.replace(model, trainer=str(record.get("trainer", model.trainer)))
    return model.train_command(model_dir.parent.name, fold)


def model_file(model_dir: Path, name: str) -> Path:
    path = model_dir / name
    if not path.is_file():
        msg = (
            f"{path}: missing; training copies it into the model folder "
            f"(`{train_command(model_dir, 0)}`)"
        )
        raise ConfigurationError(msg)
    return path


def checkpoint_paths(
    model_dir: Path, folds: Sequence[Fold] | None, checkpoint_name: str = ckpt.FINAL
) -> dict[Fold, Path]:
    """Each fold's checkpoint; a missing one is an error naming the file and the train command."""
    if not model_dir.is_dir():
        msg = f"{model_dir}: no trained model here (train it: `{train_command(model_dir, 0)}`)"
        raise ConfigurationError(msg)
    if folds is None:
        folds = available_folds(model_dir, checkpoint_name)
        if not folds:
            msg = (
                f"{model_dir}: no fold_*/{checkpoint_name} (train one: "
                f"`{train_command(model_dir, 0)}`)"
            )
            raise ConfigurationError(msg)
    paths: dict[Fold, Path] = {}
    for fold in folds:
        path = fold_dir(model_dir, fold) / checkpoint_name
        if not path.is_file():
            found = available_folds(model_dir, checkpoint_name)
            msg = (
                f"{path}: not found; train fold {fold} with `{train_command(model_dir, fold)}` "
                f"or choose folds with -f (folds with {checkpoint_name}: "
                f"{' '.join(map(str, found)) or 'none'})"
            )
            raise ConfigurationError(msg)
        paths[fold] = path
    return paths


def _network(
    configuration: Configuration,
    dataset_json: DatasetJson,
    state: dict[str, Any],
    path: Path,
    trainer_class: Any = None,
) -> nn.Module:
    """The fold's network: ours, or the user trainer's ``build_network`` (its recorded copy)."""
    spec = dataset_json.label_spec
    channels = num_input_channels(configuration, dataset_json.num_channels, spec)
    build = build_network if trainer_class is None else trainer_class.build_network
    network = build(configuration, channels, spec.num_segmentation_heads, False)
    ckpt.load_network_weights(network, state["network_weights"], path, ckpt.InputCheckpointError)
    return network.eval()


def load_trained_model(
    model_dir: str | os.PathLike,
    folds: Sequence[Fold] | None = None,
    checkpoint_name: str = ckpt.FINAL,
    *,
    trust_model_code: bool = False,
    consent_how: str = TRUST_FLAG,
) -> LoadedModel:
    """Read a model folder; ``folds=None`` takes every ``fold_k`` that has ``checkpoint_name``.

    The first checkpoint names the configuration, the trainer and the mirroring axes (upstream).
    A user trainer's carried code runs only with ``trust_model_code`` (``consent_how`` names
    that consent in the refusal: the flag, or the workflow's config key).
    """
    model_dir = Path(model_dir)
    paths = checkpoint_paths(model_dir, folds, checkpoint_name)
    plans = Plans.load(model_file(model_dir, PLANS_JSON))
    dataset_json = load_dataset_json(model_file(model_dir, DATASET_JSON))
    # None: a built-in trainer's model; a user trainer's copy only with consent
    trainer_class = load_recorded_class(model_dir, trusted=trust_model_code, how=consent_how)
    networks: list[nn.Module] = []
    first: dict[str, Any] = {}
    configuration: Configuration | None = None
    for fold, path in paths.items():
        advice = (
            f"choose another checkpoint with -chk or train fold {fold} again "
            f"(`{train_command(model_dir, fold)}`)"
        )
        state = ckpt.load_checkpoint(path, "cpu", advice, ckpt.InputCheckpointError)
        if configuration is None:
            first = {k: v for k, v in state.items() if k != "network_weights"}
            configuration = plans.configuration(_checkpoint_configuration(first, model_dir))
        networks.append(_network(configuration, dataset_json, state, path, trainer_class))
        del state
    if configuration is None:  # checkpoint_paths names at least one
        msg = f"{model_dir}: no checkpoint to read the configuration from"
        raise ConfigurationError(msg)
    axes = first.get("inference_allowed_mirroring_axes")
    return LoadedModel(
        folder=model_dir,
        plans=plans,
        configuration_name=_checkpoint_configuration(first, model_dir),
        configuration=configuration,
        dataset_json=dataset_json,
        folds=tuple(paths),
        networks=tuple(networks),
        mirror_axes=None if axes is None else tuple(int(a) for a in axes),
        trainer_name=str(first.get("trainer_name", "")),
    )


def _checkpoint_configuration(state: dict[str, Any], model_dir: Path) -> str:
    name = (state.get("init_args") or {}).get("configuration")
    if name:
        return str(name)
    return TrainedModel.from_identifier(model_dir.name).configuration
