"""What each fold was trained with, read from its own ``provenance.json``, never from the config.

A methods text must say what produced the models. The config of today may differ from the one a
fold was trained under (a fold kept from an earlier run, a rerun with other settings), so every
setting here comes from the fold's record: the ``settings`` block (config keys, as the settings
table names them) where the record has one, else ``config.trainer`` (``TrainerSettings``) and
``config.arguments``; the epochs reached from the attempts' ``end_epoch``; the start weights from
the attempts' ``start_weights``. Folds that differ are described fold by fold, never averaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnunet_core.layout.results import (
    CHECKPOINT_FINAL,
    TrainedModel,
    fold_dirs_in,
    fold_of_folder,
    is_model_folder_name,
)
from nnunet_core.report.summaries import read_json_file

PROVENANCE = "provenance.json"
BUILTIN_TRAINER = "nnUNetTrainer"
# Config keys of the settings block (nnunet_core.training.fold.settings_table) this text reads.
EPOCHS_KEY = "training.epochs"
ITERATIONS_KEY = "training.iterations_per_epoch"
TRAINER_KEY = "training.trainer"
PRETRAINED_KEY = "training.pretrained_weights"
SEED_KEY = "seed"


@dataclass(frozen=True)
class FoldRecord:
    """One fold's recorded training (None: the record does not say)."""

    configuration: str
    fold: str
    epochs: int | None = None
    iterations: int | None = None
    trainer: str | None = None
    hooks: tuple[str, ...] = ()
    seed: int | None = None
    pretrained: str | None = None  # the weights file it started from
    reached: int | None = None  # the highest epoch an attempt ended at
    finished: bool = False
    optimizer: dict[str, Any] = field(default_factory=dict)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _weights_name(named: Any) -> str:
    """A weights setting as written: a file, or ``{model, fold, checkpoint}``."""
    if isinstance(named, dict):
        model = Path(str(named.get("model", "?"))).name
        return f"{named.get('checkpoint', CHECKPOINT_FINAL)} of {model} fold {named.get('fold')}"
    return Path(str(named)).name


def _pretrained(record: dict[str, Any], settings: dict[str, Any]) -> str | None:
    """The pretrained weights the fold started from: what its attempts say they started from
    (their file and sha256); only a record without ``start_weights`` falls back to what it was
    asked to start from."""
    attempts = record.get("attempts", [])
    for attempt in attempts:
        start = attempt.get("start_weights") or {}
        if start.get("from") == "pretrained" and start.get("path"):
            digest = str(start.get("sha256") or "")[:12]
            name = Path(str(start["path"])).name
            return f"{name} (sha256 {digest})" if digest else name
    if any("start_weights" in a for a in attempts):
        return None
    named = _first(
        settings.get(PRETRAINED_KEY),
        record.get("config", {}).get("arguments", {}).get("pretrained_weights"),
    )
    return _weights_name(named) if named else None


def read_fold_record(fold_dir: Path, configuration: str) -> FoldRecord | None:
    """The fold's record, or None where it has no ``provenance.json``."""
    path = fold_dir / PROVENANCE
    if not path.is_file():
        return None
    record = read_json_file(path)
    config = record.get("config") or {}
    trainer = config.get("trainer") or {}
    settings = record.get("settings") or {}
    attempts = record.get("attempts") or []
    ends = [a["end_epoch"] for a in attempts if isinstance(a.get("end_epoch"), int)]
    return FoldRecord(
        configuration=configuration,
        fold=fold_of_folder(fold_dir),
        epochs=_first(settings.get(EPOCHS_KEY), trainer.get("num_epochs")),
        iterations=_first(settings.get(ITERATIONS_KEY), trainer.get("num_iterations")),
        trainer=_first(settings.get(TRAINER_KEY), trainer.get("trainer_name")),
        hooks=tuple(config.get("trainer_hooks") or ()),
        seed=_first(settings.get(SEED_KEY), record.get("seed"), trainer.get("seed")),
        pretrained=_pretrained(record, settings),
        reached=max(ends) if ends else None,
        finished=any(a.get("status") == "finished" for a in attempts),
        optimizer=dict(trainer.get("optimizer") or {}),
    )


def fold_records(model_dirs: Sequence[Path]) -> list[FoldRecord]:
    """Every fold record of the model folders, in folder and fold order."""
    records = []
    for model_dir in model_dirs:
        if is_model_folder_name(model_dir.name):
            configuration = TrainedModel.from_identifier(model_dir.name).configuration
        else:
            configuration = model_dir.name
        for fold_dir in fold_dirs_in(model_dir):
            record = read_fold_record(fold_dir, configuration)
            if record is not None:
                records.append(record)
    return records


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def trainer_name(name: str | None) -> str:
    """``path/to/mine.py:MyTrainer`` -> ``MyTrainer``."""
    return str(name or "").rsplit(":", 1)[-1]


def schedule_part(record: FoldRecord) -> str:
    """``for 1 epoch of 2 iterations``, from the record's schedule and the epochs it reached."""
    iterations = "?" if record.iterations is None else record.iterations
    planned, reached = record.epochs, record.reached
    if planned is None:
        return f"for {_plural(reached, 'epoch')}" if reached is not None else ""
    text = f"for {_plural(planned, 'epoch')} of {iterations} iterations"
    if reached is not None and reached > planned:
        planned_text = f"its record plans {planned}"
        return f"for {_plural(reached, 'epoch')} of {iterations} iterations ({planned_text})"
    if not record.finished:
        done = 0 if reached is None else reached
        return text + f" (unfinished: {done} trained)"
    if reached is not None and reached < planned:
        return text + f" (stopped after {reached})"
    return text


def record_parts(record: FoldRecord, with_seed: bool) -> dict[str, str]:
    """The phrases that describe a fold, by what they say (empty where there is nothing)."""
    name = trainer_name(record.trainer)
    if record.hooks:  # a user's trainer: what it changed, nothing about what it replaced
        trainer = f"by the trainer {name}, which overrides {_join(record.hooks)}"
    else:
        trainer = f"by the trainer {name}" if name and name != BUILTIN_TRAINER else ""
    optimizer = record.optimizer
    sgd = ""
    if not record.hooks and optimizer.get("initial_lr") is not None:
        sgd = (
            f"with SGD (initial learning rate {optimizer['initial_lr']}, Nesterov momentum "
            f"{optimizer.get('momentum')}, weight decay {optimizer.get('weight_decay')}, "
            "polynomial decay)"
        )
    return {
        "schedule": schedule_part(record),
        "start": f"from the pretrained weights {record.pretrained}" if record.pretrained else "",
        "seed": f"with seed {record.seed}" if with_seed and record.seed is not None else "",
        "trainer": trainer,
        "optimizer": sgd,
    }


def _fold_span(folds: Sequence[str]) -> str:
    """``fold 4``, ``folds 0-3``, ``folds 0, 2 and all``."""
    if len(folds) == 1:
        return f"fold {folds[0]}"
    numbers = [int(f) for f in folds] if all(f.isdigit() for f in folds) else None
    if numbers and numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        return f"folds {numbers[0]}-{numbers[-1]}"
    return f"folds {_join(list(folds))}"


# What an empty phrase means where other folds say something (folds that differ).
UNSAID = {
    "schedule": "with no schedule recorded",
    "start": "from a random initialisation",
    "seed": "with no seed recorded",
    "trainer": f"by the trainer {BUILTIN_TRAINER}",
    "optimizer": "with the optimiser its trainer sets",
}


def _phrase(parts: dict[str, str], keys: Sequence[str], said: bool = False) -> str:
    """The phrases of ``keys``; ``said``: an empty one spelled out (it differs between folds)."""
    return " ".join(parts[k] or (UNSAID[k] if said else "") for k in keys if parts[k] or said)


def training_sentences(records: Sequence[FoldRecord]) -> str | None:
    """One sentence where every fold was trained alike; else each group of alike folds named,
    per configuration. None without records."""
    if not records:
        return None
    with_seed = len({r.seed for r in records}) > 1
    parts = [record_parts(r, with_seed) for r in records]
    keys = list(parts[0])
    varying = [k for k in keys if len({p[k] for p in parts}) > 1]
    common = [k for k in keys if k not in varying]
    shared = _phrase(parts[0], common)
    if not varying:
        return f"Each fold was trained {shared}." if shared else None
    configurations = list(dict.fromkeys(r.configuration for r in records))
    groups: list[str] = []
    for configuration in configurations:
        mine = [
            (r, p) for r, p in zip(records, parts, strict=True) if r.configuration == configuration
        ]
        by_text: dict[str, list[str]] = {}
        for record, part in mine:
            by_text.setdefault(_phrase(part, varying, said=True), []).append(record.fold)
        prefix = f"{configuration} " if len(configurations) > 1 else ""
        groups += [f"{prefix}{_fold_span(folds)} {text}" for text, folds in by_text.items()]
    text = (
        "The folds were not all trained alike (as each fold's record says): "
        + "; ".join(groups)
        + "."
    )
    if shared:
        text += f" Every fold was trained {shared}."
    return text
