"""Pick what to run on the test set: the best configuration or pair, then its postprocessing.

Upstream's ``find_best_configuration``: candidates are the single configurations (in the order
given) followed by every unordered pair (i < j), each scored by the ``foreground_mean`` Dice of
its cross-validation. The highest score wins and a tie goes to the earlier candidate, so a
single configuration beats an ensemble that is no better. Deliberate difference: a NaN score
ranks below every number (upstream's ``max`` would fail or depend on order). Postprocessing is
then decided on the winner's cross-validation predictions. Results go to
``results/D/inference_information.json`` (upstream's keys plus every candidate's per-class Dice
and the postprocessing steps tried with their effect) and ``inference_instructions.txt``.
"""

from __future__ import annotations

import itertools
import math
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.errors import DatasetError
from nnunet_core.evaluation.crossval import crossval_summary_file, load_model_dataset_json
from nnunet_core.evaluation.ensemble import ensemble_summary_file
from nnunet_core.evaluation.postprocessing import determine_postprocessing
from nnunet_core.io.atomic import read_json, write_json, write_text
from nnunet_core.io.plans import Plans
from nnunet_core.layout.raw import IMAGES_TS
from nnunet_core.layout.results import (
    DEFAULT_FOLDS,
    PLANS_JSON,
    POSTPROCESSING_JSON,
    DatasetDirs,
    TrainedModel,
    ensemble_name,
    inference_information_file,
    inference_instructions_file,
)


@dataclass(frozen=True)
class Candidate:
    """A single configuration or an ensemble, with its cross-validation result."""

    identifier: str
    members: tuple[TrainedModel, ...]
    summary_file: Path
    score: float  # foreground_mean Dice
    mean_dice: dict[str, float]

    @property
    def source(self) -> Path:
        """The folder with the cross-validation predictions."""
        return self.summary_file.parent

    @classmethod
    def from_summary(
        cls, identifier: str, members: Sequence[TrainedModel], summary_file: Path
    ) -> Candidate:
        summary = read_json(summary_file)
        mean = {k: float(v["Dice"]) for k, v in summary["mean"].items()}
        return cls(
            identifier,
            tuple(members),
            summary_file,
            float(summary["foreground_mean"]["Dice"]),
            mean,
        )


def select_best(candidates: Sequence[Candidate]) -> Candidate:
    """Highest score; ties go to the earliest candidate; NaN ranks below every number."""
    if not candidates:
        msg = "no candidates to select from"
        raise DatasetError(msg)
    best = candidates[0]
    for candidate in candidates[1:]:
        if candidate.score > best.score or (
            math.isnan(best.score) and not math.isnan(candidate.score)
        ):
            best = candidate
    return best


def available_models(dirs: DatasetDirs, models: Sequence[TrainedModel]) -> list[TrainedModel]:
    """Unique models in order; configurations absent from their plans are skipped (as upstream)."""
    kept: list[TrainedModel] = []
    for model in dict.fromkeys(models):
        plans_path = dirs.plans_json_file(model)
        if plans_path.is_file() and model.configuration not in Plans.load(plans_path):
            print(
                f"skipping {model.identifier}: no configuration {model.configuration} in "
                f"{plans_path}",
                file=sys.stderr,
            )
            continue
        if not dirs.model_dir(model).is_dir():
            msg = (
                f"{model.configuration}: results folder {dirs.model_dir(model)} not found; train "
                f"all folds with `{model.train_command(dirs.name, 'FOLD', '--npz')}`"
            )
            raise DatasetError(msg)
        kept.append(model)
    if not kept:
        msg = (
            f"{dirs.name}: none of the configurations {[m.configuration for m in models]} is in "
            "its plans"
        )
        raise DatasetError(msg)
    return kept


def collect_candidates(
    dirs: DatasetDirs,
    models: Sequence[TrainedModel],
    folds: Sequence[int] = DEFAULT_FOLDS,
    allow_ensembling: bool = True,
    num_processes: int = 1,
    overwrite: bool = False,
) -> list[Candidate]:
    """Singles first, then every pair; summaries are (re)computed only where missing or stale."""
    candidates = [
        Candidate.from_summary(
            m.identifier, [m], crossval_summary_file(dirs, m, folds, num_processes, overwrite)
        )
        for m in models
    ]
    if allow_ensembling:
        for pair in itertools.combinations(models, 2):
            summary = ensemble_summary_file(dirs, pair, folds, num_processes, overwrite)
            candidates.append(Candidate.from_summary(ensemble_name(pair, folds), pair, summary))
    return candidates


def _model_dict(model: TrainedModel) -> dict[str, str]:
    return {
        "configuration": model.configuration,
        "trainer": model.trainer,
        "plans_identifier": model.plans,
    }


def _previous_stage(dirs: DatasetDirs, model: TrainedModel) -> str | None:
    """The cascade's previous stage, inherited too (``inherits_from`` resolved like training)."""
    plans_path = dirs.plans_json_file(model)
    if not plans_path.is_file():
        return None
    plans = Plans.load(plans_path)
    if model.configuration not in plans:
        return None
    return plans.previous_stage_of(model.configuration)


def predict_command(
    dirs: DatasetDirs,
    model: TrainedModel,
    folds: Sequence[int],
    output: str,
    save_probabilities: bool,
    root_flags: Sequence[str] = (),
) -> str:
    """``nnunet-core predict`` for one model (a cascade stage first predicts its previous stage)."""
    fold_text = " ".join(str(f) for f in folds)
    lines = []
    command = (
        f"nnunet-core predict -d {dirs.name} -i INPUT_FOLDER -o {output} -f {fold_text} -tr "
        f"{model.trainer} -c {model.configuration} -p {model.plans}"
    )
    if root_flags:
        command += " " + shlex.join(root_flags)
    previous = _previous_stage(dirs, model)
    if previous is not None:
        lines.append(
            f"# {model.configuration} is a cascade stage: predict {previous} into "
            "OUTPUT_FOLDER_PREV_STAGE first, then the cascade reads those segmentations"
        )
        lines.append(
            predict_command(
                dirs,
                TrainedModel(previous, model.plans, model.trainer),
                folds,
                "OUTPUT_FOLDER_PREV_STAGE",
                False,
                root_flags,
            )
        )
        command += " -prev_stage_predictions OUTPUT_FOLDER_PREV_STAGE"
    if save_probabilities:
        command += " --save_probabilities"
    return "\n".join([*lines, command])


def inference_instructions(
    info: dict[str, Any], dirs: DatasetDirs, num_processes: int, root_flags: Sequence[str] = ()
) -> str:
    """The commands that reproduce the selected model on new images.

    They run as printed from the working directory of ``find-best-config``: ``root_flags`` are
    the roots it used (relative ones stay relative), and only the upper-case placeholders are
    the user's to replace.
    """
    best = info["best_model_or_ensemble"]
    members = [
        TrainedModel(m["configuration"], m["plans_identifier"], m["trainer"])
        for m in best["selected_model_or_models"]
    ]
    folds = info["folds"]
    lines = [
        (
            f"Selected: {best['identifier']} (cross-validation foreground-mean Dice "
            f"{best['result_on_crossval_pre_pp']:.4f}, after postprocessing "
            f"{best['result_on_crossval_post_pp']:.4f})"
        ),
        "",
        f"Run these commands from {shlex.quote(os.getcwd())} (where find-best-config ran;",
        "relative paths below are relative to it). Replace only the placeholders:",
        (
            "  INPUT_FOLDER    your images, CASE_0000<file ending> "
            f"(one file per channel, like {IMAGES_TS})"
        ),
        "  OUTPUT_FOLDER*  new folders for the results (OUTPUT_FOLDER_PP: the final segmentations)",
        "",
        "Run inference like this:",
        "",
    ]
    if len(members) > 1:
        outputs = [f"OUTPUT_FOLDER_MODEL_{i + 1}" for i in range(len(members))]
        lines += [
            predict_command(dirs, m, folds, o, True, root_flags)
            for m, o in zip(members, outputs, strict=True)
        ]
        lines += [
            "",
            "Then ensemble the members:",
            "",
            f"nnunet-core ensemble -i {' '.join(outputs)} -o OUTPUT_FOLDER -np {num_processes}",
        ]
    else:
        lines.append(predict_command(dirs, members[0], folds, "OUTPUT_FOLDER", False, root_flags))
    lines += [
        "",
        "Once inference is completed, run postprocessing like this:",
        "",
        (
            "nnunet-core apply-postprocessing -i OUTPUT_FOLDER -o OUTPUT_FOLDER_PP -pp_pkl_file "
            f"{shlex.quote(best['postprocessing_file'])} -np {num_processes}"
        ),
        "",
    ]
    return "\n".join(lines)


def _candidate_entry(candidate: Candidate) -> dict[str, Any]:
    return {
        "identifier": candidate.identifier,
        "kind": "ensemble" if len(candidate.members) > 1 else "single",
        "members": [m.identifier for m in candidate.members],
        "source": str(candidate.source),
        "foreground_mean_dice": candidate.score,
        "mean_dice": candidate.mean_dice,
    }


def find_best_configuration(
    dirs: DatasetDirs,
    models: Sequence[TrainedModel],
    folds: Sequence[int] = DEFAULT_FOLDS,
    allow_ensembling: bool = True,
    num_processes: int = 1,
    overwrite: bool = False,
    root_flags: Sequence[str] = (),
) -> dict[str, Any]:
    """Score every candidate, pick the winner, decide its postprocessing, write both files.

    ``root_flags`` (``--results X`` ...) go into the printed commands so that they run as printed.
    """
    folds = [int(f) for f in folds]
    models = available_models(dirs, models)
    candidates = collect_candidates(dirs, models, folds, allow_ensembling, num_processes, overwrite)
    best = select_best(candidates)
    dataset_json = load_model_dataset_json(dirs, best.members[0])
    postprocessing = determine_postprocessing(best.source, dirs.gt_dir, dataset_json, num_processes)
    info = {
        "dataset_name_or_id": dirs.name,
        "folds": folds,
        "considered_models": [
            {"plans": m.plans, "configuration": m.configuration, "trainer": m.trainer}
            for m in models
        ],
        "ensembling_allowed": allow_ensembling,
        "criterion": (
            "cross-validation foreground_mean Dice; ties go to the earlier (simpler) candidate"
        ),
        "all_results": {c.identifier: c.score for c in candidates},
        "candidates": [_candidate_entry(c) for c in candidates],
        "winner": best.identifier,
        "best_model_or_ensemble": {
            "identifier": best.identifier,
            "result_on_crossval_pre_pp": best.score,
            "result_on_crossval_post_pp": postprocessing["postprocessed"]["foreground_mean"][
                "Dice"
            ],
            "postprocessing_file": str(best.source / POSTPROCESSING_JSON),
            "some_plans_file": str(best.source / PLANS_JSON),
            "selected_model_or_models": [_model_dict(m) for m in best.members],
        },
        "postprocessing": {
            "steps": [
                {"function": f, **k}
                for f, k in zip(
                    postprocessing["postprocessing_fns"],
                    postprocessing["postprocessing_kwargs"],
                    strict=True,
                )
            ],
            "steps_tried": postprocessing["steps_tried"],
            "foreground_mean_dice_before": postprocessing["input_folder"]["foreground_mean"][
                "Dice"
            ],
            "foreground_mean_dice_after": postprocessing["postprocessed"]["foreground_mean"][
                "Dice"
            ],
            "mean_dice_before": {
                k: v["Dice"] for k, v in postprocessing["input_folder"]["mean"].items()
            },
            "mean_dice_after": {
                k: v["Dice"] for k, v in postprocessing["postprocessed"]["mean"].items()
            },
        },
    }
    write_json(inference_information_file(dirs.results), info)
    write_text(
        inference_instructions_file(dirs.results),
        inference_instructions(info, dirs, num_processes, root_flags),
    )
    return info
