"""``paper/<Dataset>/methods.md`` of a methods comparison: every method, not only the baseline.

The baseline's paragraph is the one-run paragraph (``methods.methods_paragraph``); then each
method compared, the baseline first: its trainer and the hooks it overrides, its planner and
plans, its configurations, what its folds were trained with and what its selection chose. Every
item comes from the method's own results tree (fold ``provenance.json`` records, ``plans.json``,
``inference_information.json``) as for one run, never from the config: a method whose folds
were trained differently, or whose seeds differ, says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nnunet_core.layout.results import PLANS_JSON, TrainedModel, is_model_folder_name
from nnunet_core.report.collect import class_names
from nnunet_core.report.fold_records import (
    BUILTIN_TRAINER,
    FoldRecord,
    fold_records,
    trainer_name,
    training_sentences,
)
from nnunet_core.report.methods import _info, _join, configuration_sentence, methods_paragraph
from nnunet_core.report.methods_comparison import MethodRun
from nnunet_core.report.summaries import ReportInputError, read_json_file
from nnunet_core.report.tables import write_markdown

METHODS_MD = "methods.md"
PLANNER_KEY = "experiment_planner_used"


def selected_model_dirs(results_dir: Path) -> list[Path]:
    """The model folders of every candidate the run's selection compared."""
    info = _info(results_dir)
    members = [m for c in info.get("candidates", []) for m in c.get("members", [])]
    return [results_dir / m for m in dict.fromkeys(members) if (results_dir / m).is_dir()]


def trainer_sentence(records: Sequence[FoldRecord], model_dirs: Sequence[Path]) -> str:
    """``trainer nnUNetTrainerNoMirroring, which overrides configure_augmentation``."""
    named = {trainer_name(r.trainer) for r in records if r.trainer}
    if not named:  # no record says: the model folders' names do
        named = {
            TrainedModel.from_identifier(d.name).trainer
            for d in model_dirs
            if is_model_folder_name(d.name)
        }
    hooks = list(dict.fromkeys(h for r in records for h in r.hooks))
    text = f"trainer {_join(sorted(named)) or 'not recorded'}"
    if hooks:
        return text + f", which overrides {_join(hooks)}"
    if named == {BUILTIN_TRAINER}:
        return text + " (upstream's, no hook overridden)"
    return text


def planner_sentence(model_dirs: Sequence[Path]) -> str | None:
    """``planner ExperimentPlanner (plans nnUNetPlans)`` from the model folders' plans."""
    planners, plans = [], []
    for model_dir in model_dirs:
        if not is_model_folder_name(model_dir.name):
            continue
        plans.append(TrainedModel.from_identifier(model_dir.name).plans)
        plans_file = model_dir / PLANS_JSON
        if plans_file.is_file():
            planner = read_json_file(plans_file).get(PLANNER_KEY)
            if planner:
                planners.append(str(planner))
    plans = list(dict.fromkeys(plans))
    planners = list(dict.fromkeys(planners))
    if not plans and not planners:
        return None
    named = f"planner {_join(planners)}" if planners else "planner not recorded"
    return named + (f" (plans {_join(plans)})" if plans else "")


def per_seed(texts: dict[int, str | None]) -> str | None:
    """One text where every seed's is the same, else each seed's named."""
    shown = {seed: text for seed, text in texts.items() if text}
    if not shown:
        return None
    if len(set(shown.values())) == 1 and len(shown) == len(texts):
        return next(iter(shown.values()))
    return " ".join(f"Seed {seed}: {text}" for seed, text in shown.items())


def method_item(method: str, runs: Sequence[MethodRun], baseline: bool) -> str:
    """One method's description from its runs (seeds) of one dataset."""
    runs = sorted(runs, key=lambda r: r.run.seed)
    first = runs[0].run.results_dir
    model_dirs = selected_model_dirs(first)
    records = fold_records(model_dirs)
    parts = [trainer_sentence(records, model_dirs)]
    planner = planner_sentence(model_dirs)
    if planner:
        parts.append(planner)
    configurations = [s for s in map(configuration_sentence, model_dirs) if s]
    if configurations:
        parts.append(f"configurations {_join(configurations)}")
    head = f"- **{method}**{' (baseline)' if baseline else ''}: {'; '.join(parts)}."
    training = per_seed(
        {
            r.run.seed: training_sentences(fold_records(selected_model_dirs(r.run.results_dir)))
            for r in runs
        }
    )
    chosen = per_seed(
        {r.run.seed: f"Selected {_info(r.run.results_dir).get('winner', '?')}." for r in runs}
    )
    return " ".join(t for t in (head, training, chosen) if t)


def methods_text(runs: Sequence[MethodRun], baseline: str, dataset: str) -> str:
    """The baseline's paragraph, then every method of the comparison on ``dataset``."""
    mine = [r for r in runs if r.run.dataset == dataset]
    by_method: dict[str, list[MethodRun]] = {}
    for entry in mine:
        by_method.setdefault(entry.method, []).append(entry)
    if baseline not in by_method:
        msg = f"{dataset}: no run of the baseline method {baseline}"
        raise ReportInputError(msg)
    base = sorted(by_method[baseline], key=lambda r: r.run.seed)
    first = base[0].run.results_dir
    seed_dirs = [(r.run.seed, r.run.results_dir) for r in base]
    paragraph = methods_paragraph(
        first, [s for s, _ in seed_dirs], class_names(first, []), seed_dirs
    )
    order = [baseline, *(m for m in by_method if m != baseline)]
    items = [method_item(m, by_method[m], m == baseline) for m in order]
    intro = (
        f"The methods compared on {dataset} ({len(order)}; each against the baseline "
        f"{baseline} on the same cases), as each method's own records say:"
    )
    return "\n\n".join([paragraph, intro, "\n".join(items)]) + "\n"


def write_methods_texts(runs: Sequence[MethodRun], baseline: str, output: Path) -> list[Path]:
    """``<output>/<dataset>/methods.md`` for every dataset of the comparison."""
    datasets = list(dict.fromkeys(r.run.dataset for r in runs))
    return [
        write_markdown(methods_text(runs, baseline, d), output / d / METHODS_MD) for d in datasets
    ]
