"""A methods paragraph written from what the run used: plans, training records and selection.

Every number comes from a file of the results tree, not from defaults: patch and batch sizes
and spacing from each candidate model's ``plans.json``, what each fold was trained with from
its own record (``provenance.json`` via ``fold_records``: folds that differ are named fold by
fold), folds, candidates, winner and postprocessing from ``inference_information.json``. What
a file does not say is left out, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.evaluation.selection_file import read_inference_information
from nnunet_core.io.plans import Plans
from nnunet_core.layout.results import (
    PLANS_JSON,
    TrainedModel,
    inference_information_file,
    is_model_folder_name,
)
from nnunet_core.report.fold_records import fold_records, training_sentences
from nnunet_core.report.summaries import ReportInputError, read_json_file


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _size(values: Sequence[Any]) -> str:
    return " x ".join(str(v) for v in values)


def _spacing(values: Sequence[float]) -> str:
    return " x ".join(f"{float(v):.3g}" for v in values) + " mm"


def configuration_sentence(model_dir: Path) -> str | None:
    """``3d_fullres (patch 40 x 48 x 48, batch 2, spacing 1 x 1 x 1 mm)`` from plans.json."""
    plans_file = model_dir / PLANS_JSON
    if not plans_file.is_file() or not is_model_folder_name(model_dir.name):
        return None
    name = TrainedModel.from_identifier(model_dir.name).configuration
    try:
        configuration = Plans(read_json_file(plans_file), plans_file).configuration(name)
    except (KeyError, ConfigurationError):
        return None
    parts = []
    if configuration.has("patch_size"):
        parts.append(f"patch {_size(configuration.patch_size)}")
    if configuration.has("batch_size"):
        parts.append(f"batch {configuration.batch_size}")
    if configuration.has("spacing"):
        parts.append(f"spacing {_spacing(configuration.spacing)}")
    return f"{name} ({', '.join(parts)})" if parts else name


def postprocessing_sentence(info: dict[str, Any], class_names: dict[str, str]) -> str:
    steps = (info.get("postprocessing") or {}).get("steps", [])
    if not steps:
        return "No postprocessing improved the cross-validation Dice, so none was applied."
    scopes = [_scope_name(s.get("labels_or_regions"), class_names) for s in steps]
    return (
        "Postprocessing kept only the largest connected component of "
        f"{_join(scopes)}, because that raised the cross-validation Dice."
    )


def _info(results_dir: Path) -> dict[str, Any]:
    """The checked ``inference_information.json`` of ``results_dir`` (one line if malformed)."""
    return read_inference_information(inference_information_file(results_dir), ReportInputError)


def seeds_postprocessing_sentence(
    seed_dirs: Sequence[tuple[int, Path]], class_names: dict[str, str]
) -> str | None:
    """Each seed's postprocessing, when the seeds' selections chose different ones (else None)."""
    chosen = {seed: postprocessing_sentence(_info(d), class_names) for seed, d in seed_dirs}
    if len(set(chosen.values())) <= 1:
        return None
    parts = [f"seed {seed}: {text[0].lower()}{text[1:-1]}" for seed, text in chosen.items()]
    return "The seeds chose different postprocessing: " + "; ".join(parts) + "."


def _scope_name(scope: Any, class_names: dict[str, str]) -> str:
    """``1`` -> ``organ``; ``[1, 2]`` -> ``organ and lesion together``."""
    if isinstance(scope, list | tuple):
        return _join([_scope_name(v, class_names) for v in scope]) + " together"
    return class_names.get(str(scope), str(scope))


def methods_paragraph(
    results_dir: Path,
    seeds: Sequence[int] = (0,),
    class_names: dict[str, str] | None = None,
    seed_dirs: Sequence[tuple[int, Path]] = (),
) -> str:
    """The paragraph for one dataset's results folder (``seeds``: the seeds it was run with;
    ``class_names``: label key -> name; ``seed_dirs``: (seed, results folder) of every seed,
    whose postprocessing is named per seed where they differ)."""
    info = _info(results_dir)
    candidates = info.get("candidates", [])
    members = list(dict.fromkeys(m for c in candidates for m in c.get("members", [])))
    model_dirs = [results_dir / m for m in members if (results_dir / m).is_dir()]
    configurations = [s for s in map(configuration_sentence, model_dirs) if s]
    folds = info.get("folds", [])
    seed_text = (
        f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} ({_join([str(s) for s in seeds])})"
    )
    sentences = [
        f"We trained nnU-Net-style models (nnunet-core, nnU-Net v2's method) on "
        f"{results_dir.name}: the configurations {_join(configurations)}.",
        f"Each configuration was cross-validated on {len(folds)} folds "
        f"({_join([str(f) for f in folds])}) with {seed_text}.",
    ]
    schedule = training_sentences(fold_records(model_dirs))
    if schedule:
        sentences.append(schedule)
    ensembles = "and every pair ensemble " if info.get("ensembling_allowed", True) else ""
    winner = info.get("winner", "")
    sentences.append(
        f"Each configuration {ensembles}was scored by its cross-validation foreground-mean Dice "
        f"and the best was selected ({winner})."
    )
    per_seed = seeds_postprocessing_sentence(seed_dirs, class_names or {})
    sentences.append(per_seed or postprocessing_sentence(info, class_names or {}))
    return " ".join(sentences)
