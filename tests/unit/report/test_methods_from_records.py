"""The methods texts are built from what each fold recorded (``provenance.json``, written by the
real ``provenance.start_attempt``/``end_attempt``), never from a config: folds that differ are
named fold by fold, and a methods comparison's ``methods.md`` describes every method.

Two methods on fake selected results (tests/helpers/paper.py: two configurations x five folds):
``nnunet`` with upstream's trainer, ``mine`` with a user trainer that overrides two hooks and a
ResEnc planner recorded in its plans.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from nnunet_core.io.plans import Plans
from nnunet_core.layout.results import PLANS_JSON, TrainedModel
from nnunet_core.report.methods import methods_paragraph
from nnunet_core.report.methods_comparison import MethodRun
from nnunet_core.report.methods_output import write_methods_comparison
from nnunet_core.report.paper_data import Run
from nnunet_core.training.fold import provenance
from nnunet_core.training.trainer.settings import TrainerSettings
from tests.helpers.fake_results import SPLITS
from tests.helpers.paper import CONFIGS, seed_tree

FOLDS = range(len(SPLITS))
USER_TRAINER = "/home/me/mine.py:MyTrainer"
HOOKS = ["build_loss", "training_transform"]


def record_fold(
    fold_dir: Path,
    settings: TrainerSettings,
    hooks: list[str] | None = None,
    reached: int | None = None,
    status: str = "finished",
    start_weights: dict | None = None,
    fold_settings: dict | None = None,
) -> Path:
    """What training writes: one attempt from epoch 0, ended at ``reached`` (the schedule's)."""
    path = fold_dir / provenance.PROVENANCE_JSON
    path.unlink(missing_ok=True)
    config = {"arguments": {"trainer": settings.trainer_name}, "trainer": asdict(settings)}
    if hooks is not None:
        config["trainer_hooks"] = hooks
    plans = Plans({"configurations": {}})
    provenance.start_attempt(
        path, config, plans, settings.seed, torch.device("cpu"), 0, start_weights, fold_settings
    )
    provenance.end_attempt(path, status, settings.num_epochs if reached is None else reached)
    return path


def fold_dir(run: Run, configuration: str, fold: int) -> Path:
    return run.results_dir / TrainedModel(configuration).identifier / f"fold_{fold}"


def record_run(run: Run, settings: TrainerSettings, hooks: list[str] | None = None) -> None:
    for configuration in CONFIGS:
        for fold in FOLDS:
            record_fold(fold_dir(run, configuration, fold), settings, hooks)


SHORT = TrainerSettings(num_epochs=1, num_iterations=2)


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    nnunet = seed_tree(tmp_path_factory.mktemp("nnunet"), 0)
    mine = seed_tree(tmp_path_factory.mktemp("mine"), 0)
    record_run(nnunet, SHORT)
    record_run(mine, replace(SHORT, trainer_name=USER_TRAINER), HOOKS)
    for configuration in CONFIGS:
        plans_file = mine.results_dir / TrainedModel(configuration).identifier / PLANS_JSON
        plans = json.loads(plans_file.read_text())
        plans["experiment_planner_used"] = "nnUNetPlannerResEncM"
        plans_file.write_text(json.dumps(plans))
    return {"nnunet": nnunet, "mine": mine}


@pytest.fixture
def run(trees: dict[str, Run], tmp_path: Path) -> Run:
    """A copy of the baseline's tree to change records in."""
    base = trees["nnunet"]
    root = tmp_path / "copy"
    shutil.copytree(base.results_dir.parent.parent, root)
    results = root / base.results_dir.relative_to(base.results_dir.parent.parent)
    return Run(base.dataset, base.seed, results, base.test_summary)


def test_folds_trained_alike_are_one_sentence(run: Run) -> None:
    text = methods_paragraph(run.results_dir)
    assert "Each fold was trained for 1 epoch of 2 iterations with SGD" in text
    assert "not all trained alike" not in text


def test_two_folds_with_different_recorded_iterations_are_named_fold_by_fold(run: Run) -> None:
    for configuration in CONFIGS:
        record_fold(fold_dir(run, configuration, 4), replace(SHORT, num_iterations=5))
    text = methods_paragraph(run.results_dir)
    assert "Each fold was trained for" not in text  # never one averaged sentence
    for configuration in CONFIGS:
        assert f"{configuration} folds 0-3 for 1 epoch of 2 iterations" in text, text
        assert f"{configuration} fold 4 for 1 epoch of 5 iterations" in text, text
    assert "Every fold was trained with SGD" in text  # what they share, said once


def test_the_text_follows_the_record_and_prefers_its_settings_block(run: Run) -> None:
    """A record changed by hand (as a rerun with other settings would leave it): the text says
    the record's value; a ``settings`` block (config keys) wins over ``config.trainer``."""
    path = fold_dir(run, "2d", 1) / provenance.PROVENANCE_JSON
    record = json.loads(path.read_text())
    record["config"]["trainer"]["num_iterations"] = 9
    path.write_text(json.dumps(record))
    assert "2d fold 1 for 1 epoch of 9 iterations" in methods_paragraph(run.results_dir)
    table = {"training.iterations_per_epoch": 7, "training.epochs": 3, "seed": 0}
    nine = replace(SHORT, num_iterations=9)
    record_fold(fold_dir(run, "2d", 1), nine, reached=3, fold_settings=table)
    text = methods_paragraph(run.results_dir)
    assert "2d fold 1 for 3 epochs of 7 iterations." in text, text
    assert "9 iterations" not in text


def test_the_epochs_reached_come_from_the_attempts(run: Run) -> None:
    record_fold(fold_dir(run, "3d_fullres", 2), replace(SHORT, num_epochs=4), None, 3, "stopped")
    text = methods_paragraph(run.results_dir)
    assert "3d_fullres fold 2 for 4 epochs of 2 iterations (unfinished: 3 trained)" in text, text


def test_methods_md_describes_every_method(trees: dict[str, Run], tmp_path: Path) -> None:
    runs = [MethodRun(name, run) for name, run in trees.items()]
    written = write_methods_comparison(runs, "nnunet", tmp_path)
    methods_md = tmp_path / trees["nnunet"].dataset / "methods.md"
    assert methods_md in written
    text = methods_md.read_text()
    baseline = next(line for line in text.splitlines() if line.startswith("- **nnunet**"))
    assert "(baseline)" in baseline and "trainer nnUNetTrainer (upstream's" in baseline
    assert "plans nnUNetPlans" in baseline and "1 epoch of 2 iterations" in baseline
    other = next(line for line in text.splitlines() if line.startswith("- **mine**"))
    assert "trainer MyTrainer, which overrides build_loss and training_transform" in other
    assert "planner nnUNetPlannerResEncM (plans nnUNetPlans)" in other
    assert "1 epoch of 2 iterations" in other and "Selected " in other
    assert "nnUNetPlannerResEncM" not in baseline


def test_paper_table_leaves_methods_md_to_the_comparison(trees: dict[str, Run], tmp_path) -> None:
    """With methods, ``paper-table --no-methods-text`` writes no ``methods.md`` (the comparison
    writes the one that names every method); without, it writes the baseline's."""
    from nnunet_core.report.paper_output import write_paper_tables

    run = trees["nnunet"]
    written = write_paper_tables([run], tmp_path / "with_methods", methods_text=False)
    assert not any(p.name == "methods.md" for p in written)
    assert not (tmp_path / "with_methods" / run.dataset / "methods.md").exists()
    written = write_paper_tables([run], tmp_path / "plain")
    assert tmp_path / "plain" / run.dataset / "methods.md" in written


def test_a_fold_started_from_pretrained_weights_names_them(run: Run, tmp_path: Path) -> None:
    weights = tmp_path / "weights.pth"
    weights.write_bytes(b"not a real checkpoint: only its name and sha256 are recorded")
    start = provenance.pretrained_start(weights, [])
    record_fold(fold_dir(run, "2d", 3), SHORT, start_weights=start)
    text = methods_paragraph(run.results_dir)
    digest = provenance.file_sha256(weights)[:12]
    assert f"2d fold 3 from the pretrained weights weights.pth (sha256 {digest})" in text, text
    assert "2d folds 0, 1, 2 and 4 from a random initialisation" in text, text
