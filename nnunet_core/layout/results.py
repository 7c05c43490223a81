"""The results tree (upstream's): every name of it, built and parsed here only.

Training, evaluation, selection, the report and the workflow all build their paths with these
functions, so what a rule declares and what a command writes are the same string. Functions take
any ``str`` for a configuration or fold, so the workflow can pass ``"{configuration}"`` and get a
wildcard pattern.

    results/<Dataset>/<trainer>__<plans>__<configuration>/   plans.json, dataset.json
        trainer.json, trainer_source/<file>.py   (a user's trainer only: how to rebuild it)
        fold_<k>/checkpoint_final.pth, validation/summary.json
        crossval_results_folds_<0_1_2_3_4>/summary.json, postprocessing.json
        predicted_next_stage/<next configuration>/<case>.b2nd   (3d_lowres: the cascade's input)
    results/<Dataset>/ensembles/ensemble___<model>___<model>___<0_1_2_3_4>/summary.json
    results/<Dataset>/inference_information.json, inference_instructions.txt, report/
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.preprocessed import (
    DATASET_JSON,
    DEFAULT_PLANS_NAME,
    GT_FOLDER,
    plans_file,
)

DEFAULT_TRAINER = "nnUNetTrainer"

PLANS_JSON = "plans.json"  # a model folder's (and evaluated folder's) copy of the plans
SUMMARY_JSON = "summary.json"  # an evaluated folder's metrics (upstream's format)
POSTPROCESSING_JSON = "postprocessing.json"
POSTPROCESSED_FOLDER = "postprocessed"
INFERENCE_INFORMATION_JSON = "inference_information.json"
INFERENCE_INSTRUCTIONS_TXT = "inference_instructions.txt"
CHECKPOINT_FINAL = "checkpoint_final.pth"
CHECKPOINT_LATEST = "checkpoint_latest.pth"
CHECKPOINT_BEST = "checkpoint_best.pth"
# A fold's other files that upstream's model export takes along when they exist.
PROGRESS_PNG = "progress.png"
DEBUG_JSON = "debug.json"
NETWORK_ARCHITECTURE_PDF = "network_architecture.pdf"
# Upstream's pickled postprocessing (we never write or read one; an export copies it as bytes).
POSTPROCESSING_PKL = "postprocessing.pkl"
# The name upstream's export looks for next to inference_information.json (its selection writes
# inference_instructions.txt instead, so upstream's archives never hold this file).
INFERENCE_INFORMATION_TXT = "inference_information.txt"
VALIDATION_FOLDER = "validation"
# A model folder trained by a user's trainer (``-tr file.py:Class``): how the trainer was found,
# and a copy of its source file, which ``predict`` loads to rebuild the network.
TRAINER_JSON = "trainer.json"
TRAINER_SOURCE_FOLDER = "trainer_source"
# In a fold folder: held by the one process training that fold (training.fold.lock).
FOLD_LOCK_NAME = ".training.lock"
# In a fold folder on a cluster: the exit status and line of an attempt that a retry cannot help
# (cluster.no_retry); the next attempt exits at once with it, a new run removes it.
NO_RETRY_MARKER = "no_retry.json"
# A 3d_lowres model folder's segmentations for the cascade's next stage (next to the folds, as
# upstream: every fold writes its validation cases there, so the folder covers the training set).
PREDICTED_NEXT_STAGE_FOLDER = "predicted_next_stage"
NEXT_STAGE_SUFFIX = ".b2nd"
ENSEMBLES_FOLDER = "ensembles"
REPORT_FOLDER = "report"
REPORT_PAGE_MD = "report.md"  # the report's page, written last (report/build.py)
# the report's qualitative examples, <rank>_<case>.png (report/qualitative.py)
REPORT_EXAMPLES_FOLDER = "qualitative"
DEFAULT_FOLDS = (0, 1, 2, 3, 4)

_MODEL_SEPARATOR = "__"
_ENSEMBLE_SEPARATOR = "___"
_ENSEMBLE_PREFIX = "ensemble"
_FOLD_PREFIX = "fold_"
_CROSSVAL_PREFIX = "crossval_results_folds_"
CHECKPOINT_SUFFIX = ".pth"


def model_folder_name(trainer: str, plans: str, configuration: str) -> str:
    """``Trainer__Plans__Config``, upstream's trained model folder name. A user's trainer
    (``module:Class``, ``file.py:Class``) is named by its class, as upstream's."""
    return _MODEL_SEPARATOR.join((trainer.rsplit(":", 1)[-1], plans, configuration))


def is_model_folder_name(name: str) -> bool:
    return len(name.split(_MODEL_SEPARATOR)) == 3


@dataclass(frozen=True)
class TrainedModel:
    """One trained configuration, named like upstream's results folder ``T__P__C``."""

    configuration: str
    plans: str = DEFAULT_PLANS_NAME
    trainer: str = DEFAULT_TRAINER

    @property
    def identifier(self) -> str:
        return model_folder_name(self.trainer, self.plans, self.configuration)

    @classmethod
    def from_identifier(cls, identifier: str) -> TrainedModel:
        """The inverse of ``identifier`` (a model folder name)."""
        if not is_model_folder_name(identifier):
            msg = (
                f"{identifier!r} is not a model folder name like "
                "nnUNetTrainer__nnUNetPlans__3d_fullres"
            )
            raise ConfigurationError(msg)
        trainer, plans, configuration = identifier.split(_MODEL_SEPARATOR)
        return cls(configuration, plans, trainer)

    def train_command(self, dataset: str, fold: int | str, *flags: str) -> str:
        """The ``nnunet-core train`` call that (re)produces this fold's outputs."""
        extra = [f"-tr {self.trainer}"] if self.trainer != DEFAULT_TRAINER else []
        extra += [f"-p {self.plans}"] if self.plans != DEFAULT_PLANS_NAME else []
        return " ".join(
            ["nnunet-core train", dataset, self.configuration, str(fold), *extra, *flags]
        )


def model_dirs_of(results_dir: Path, trainer: str, plans_name: str) -> list[Path]:
    """The model folders in ``results/DatasetXXX`` of this trainer (a user's named by its class)
    and plans, one per configuration trained."""
    if not results_dir.is_dir():
        return []
    prefix = model_folder_name(trainer, plans_name, "")
    return [
        model
        for model in sorted(results_dir.iterdir())
        if model.is_dir() and model.name.startswith(prefix) and is_model_folder_name(model.name)
    ]


def trained_model_dir(
    results_dir: Path,
    configuration: str,
    plans_name: str = DEFAULT_PLANS_NAME,
    trainer: str = DEFAULT_TRAINER,
) -> Path:
    """``results/DatasetXXX/Trainer__Plans__Config``."""
    return results_dir / model_folder_name(trainer, plans_name, configuration)


def parse_fold(text: str | int) -> int | str:
    """``'3'`` -> 3, ``'all'`` -> ``'all'``; anything else is an error."""
    value = str(text).strip()
    if value.lower() == "all":
        return "all"
    if not value.isdigit():
        msg = f"fold must be a number >= 0 or 'all', got {text!r}"
        raise ConfigurationError(msg)
    return int(value)


def fold_folder_name(fold: int | str) -> str:
    """``3`` -> ``fold_3``."""
    return f"{_FOLD_PREFIX}{fold}"


def fold_dir(model_dir: Path, fold: int | str) -> Path:
    return model_dir / fold_folder_name(fold)


def fold_dirs_in(model_dir: Path) -> list[Path]:
    """The ``fold_*`` folders of a model folder, numbered folds first in order, then ``all``."""

    def key(path: Path) -> tuple[int, int | str]:
        suffix = fold_of_folder(path)
        return (0, int(suffix)) if suffix.isdigit() else (1, suffix)

    return sorted((p for p in model_dir.glob(f"{_FOLD_PREFIX}*") if p.is_dir()), key=key)


def is_fold_folder_name(name: str) -> bool:
    """``fold_3``, ``fold_all`` (any text after ``fold_``)."""
    return name.startswith(_FOLD_PREFIX)


def fold_of_folder(folder: Path) -> str:
    """``.../fold_3`` -> ``'3'`` (the text after ``fold_``)."""
    return folder.name[len(_FOLD_PREFIX) :]


def available_folds(model_dir: Path, checkpoint_name: str = CHECKPOINT_FINAL) -> list[int | str]:
    """Folds with ``checkpoint_name``, numerically sorted; ``fold_all`` is left out (upstream)."""
    folds = [
        parse_fold(fold_of_folder(p))
        for p in fold_dirs_in(model_dir)
        if fold_of_folder(p).isdigit() and (p / checkpoint_name).is_file()
    ]
    return sorted(folds, key=int)


def validation_dir(fold_folder: Path) -> Path:
    """A fold's validation predictions and their ``summary.json``."""
    return fold_folder / VALIDATION_FOLDER


def next_stage_dir(model_dir: Path, next_configuration: str) -> Path:
    """``<model folder>/predicted_next_stage/<next configuration>`` (upstream's place)."""
    return model_dir / PREDICTED_NEXT_STAGE_FOLDER / next_configuration


def next_stage_file(model_dir: Path, next_configuration: str, case_id: str) -> Path:
    """One case's segmentation for the next stage, in that stage's preprocessed geometry."""
    return next_stage_dir(model_dir, next_configuration) / f"{case_id}{NEXT_STAGE_SUFFIX}"


def previous_stage_dir(
    results_dir: Path,
    previous_configuration: str,
    configuration: str,
    plans_name: str = DEFAULT_PLANS_NAME,
    trainer: str = DEFAULT_TRAINER,
) -> Path:
    """Where a cascade stage reads its previous stage's segmentations (upstream: the same
    trainer and plans, the previous configuration's model folder)."""
    model_dir = trained_model_dir(results_dir, previous_configuration, plans_name, trainer)
    return next_stage_dir(model_dir, configuration)


def folds_tag(folds: Sequence[int | str]) -> str:
    """``(0, 1, 2, 3, 4)`` -> ``"0_1_2_3_4"`` (upstream's folder suffix)."""
    return "_".join(str(f) for f in folds)


def crossval_dir(model_dir: Path, folds: Sequence[int | str]) -> Path:
    return model_dir / f"{_CROSSVAL_PREFIX}{folds_tag(folds)}"


def ensemble_name(
    models: Sequence[TrainedModel], folds: Sequence[int | str] = DEFAULT_FOLDS
) -> str:
    """``ensemble___A___B___0_1_2_3_4`` with the members' model folder names (upstream's)."""
    return _ENSEMBLE_SEPARATOR.join(
        [_ENSEMBLE_PREFIX, *(m.identifier for m in models), folds_tag(folds)]
    )


def is_ensemble_name(name: str) -> bool:
    return name.startswith(_ENSEMBLE_PREFIX + _ENSEMBLE_SEPARATOR)


def ensemble_member_names(name: str) -> list[str]:
    """``ensemble___A___B___0_1_2_3_4`` -> ``[A, B]``; ``[]`` for a model folder name."""
    return name.split(_ENSEMBLE_SEPARATOR)[1:-1]


def members_from_ensemble_name(name: str) -> list[TrainedModel]:
    """The members of an ensemble folder name (inverse of ``ensemble_name``)."""
    return [TrainedModel.from_identifier(p) for p in ensemble_member_names(name)]


def ensembles_dir(results_dir: Path) -> Path:
    return results_dir / ENSEMBLES_FOLDER


def inference_information_file(results_dir: Path) -> Path:
    return results_dir / INFERENCE_INFORMATION_JSON


def inference_instructions_file(results_dir: Path) -> Path:
    return results_dir / INFERENCE_INSTRUCTIONS_TXT


def report_dir(results_dir: Path) -> Path:
    return results_dir / REPORT_FOLDER


@dataclass(frozen=True)
class DatasetDirs:
    """Where one dataset's results and references live."""

    name: str
    results: Path
    preprocessed: Path

    @property
    def gt_dir(self) -> Path:
        return self.preprocessed / GT_FOLDER

    @property
    def ensembles_dir(self) -> Path:
        return ensembles_dir(self.results)

    def model_dir(self, model: TrainedModel) -> Path:
        return trained_model_dir(self.results, model.configuration, model.plans, model.trainer)

    def dataset_json_file(self, model: TrainedModel | None = None) -> Path:
        """The model folder's copy of ``dataset.json`` (written by training), else
        preprocessed's."""
        if model is not None and (self.model_dir(model) / DATASET_JSON).is_file():
            return self.model_dir(model) / DATASET_JSON
        return self.preprocessed / DATASET_JSON

    def plans_json_file(self, model: TrainedModel) -> Path:
        own = self.model_dir(model) / PLANS_JSON
        return own if own.is_file() else plans_file(self.preprocessed, model.plans)
