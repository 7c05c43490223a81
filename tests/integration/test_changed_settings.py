"""A rerun with changed settings through real Snakemake (issue 46, "A change is noticed").

One fold is trained with 5 iterations per epoch. Changing only ``training.save_every`` (a
setting that does not invalidate a fold) reruns nothing: no train job, no new epoch line. Changing
``training.iterations_per_epoch`` to 2 invalidates it: a dry run says so in one console line and
moves nothing; the real run says so too, its job sets the old folder aside (renamed, kept whole),
trains the fold from the start, and ``provenance.json`` records the new value.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from nnunet_core.layout.results import CHECKPOINT_FINAL
from nnunet_core.training.fold.changes import REPLACED_PREFIX
from tests.helpers.workflow import DATASET, copy_prepared, job_counts, prepared_config, snakemake

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the workflow's platform"),
]

MODEL = "nnUNetTrainer__nnUNetPlans__3d_fullres"
LINE = (
    f"{DATASET} 3d_fullres fold 0 starts over: training.iterations_per_epoch changed 5 -> 2 "
    "(its folder is kept as replaced-fold_0-<time> when the job starts)"
)


def training_logs(fold: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(fold.glob("training_log_*.txt"))}


def recorded(fold: Path) -> dict:
    return json.loads((fold / "provenance.json").read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, prepared_work: Path) -> dict:
    root = tmp_path_factory.mktemp("changed_settings")
    work = copy_prepared(prepared_work, root / "work")
    config = prepared_config(work)
    config["training"].update(
        folds=[0],
        epochs=1,
        iterations_per_epoch=5,
        val_iterations_per_epoch=1,
        save_every=1,
        retries=0,
        npz=False,
    )
    fold = work / "results" / DATASET / MODEL / "fold_0"
    seen: dict = {"fold": fold}
    first = snakemake(root, config, "trained")
    seen["first"] = job_counts(first.stdout + first.stderr)
    seen["first_logs"] = training_logs(fold)
    seen["first_final"] = (fold / CHECKPOINT_FINAL).read_bytes()
    seen["first_settings"] = recorded(fold)["settings"]

    config["training"]["save_every"] = 2  # does not invalidate
    kept = snakemake(root, config, "trained")
    seen["kept"] = kept
    seen["kept_logs"] = training_logs(fold)

    config["training"]["iterations_per_epoch"] = 2  # invalidates
    seen["dry"] = snakemake(root, config, "trained", "-n")
    seen["after_dry"] = sorted(p.name for p in fold.parent.iterdir() if p.is_dir())
    seen["changed"] = snakemake(root, config, "trained")
    seen["log"] = (work / "logs" / DATASET / "train_3d_fullres_fold0.log").read_text()
    return seen


def test_a_changed_save_every_trains_nothing(runs):
    assert runs["first"].get("train") == 1, runs["first"]
    kept = runs["kept"]
    assert "train" not in job_counts(kept.stdout + kept.stderr), kept.stdout[-3000:]
    assert runs["kept_logs"] == runs["first_logs"]  # no new epoch line, no new log
    assert any(": Epoch 0" in text for text in runs["first_logs"].values()), runs["first_logs"]
    assert "starts over" not in kept.stderr


def test_the_first_run_records_its_settings(runs):
    settings = runs["first_settings"]
    assert settings["training.iterations_per_epoch"] == 5
    assert settings["training.save_every"] == 1
    assert settings["configuration"] == "3d_fullres" and settings["fold"] == "0"
    assert len(settings["plans_sha256"]) == len(settings["splits_sha256"]) == 64
    assert settings["trainer_source_sha256"] is None  # the built-in trainer


def test_a_dry_run_names_the_fold_and_the_key_and_moves_nothing(runs):
    assert runs["dry"].stderr.count(LINE) == 1, runs["dry"].stderr[-3000:]
    assert runs["after_dry"] == ["fold_0"], runs["after_dry"]


def test_a_changed_iterations_per_epoch_starts_the_fold_over(runs):
    changed, fold = runs["changed"], runs["fold"]
    assert changed.stderr.count(LINE) == 1, changed.stderr[-3000:]
    assert job_counts(changed.stdout + changed.stderr).get("train") == 1
    aside = [p for p in fold.parent.iterdir() if p.name.startswith(f"{REPLACED_PREFIX}fold_0-")]
    assert len(aside) == 1, list(fold.parent.iterdir())
    # the old folder, whole: its weights, its logs and its record of 5 iterations
    assert (aside[0] / CHECKPOINT_FINAL).read_bytes() == runs["first_final"]
    assert training_logs(aside[0]) == runs["first_logs"]
    assert recorded(aside[0])["settings"]["training.iterations_per_epoch"] == 5
    assert not (aside[0] / ".training.lock").exists()
    # the new fold: trained from the start with 2 iterations, and says so
    record = recorded(fold)
    assert record["settings"]["training.iterations_per_epoch"] == 2
    assert record["settings"]["training.save_every"] == 2
    assert [a["start_epoch"] for a in record["attempts"]] == [0]
    assert record["attempts"][0]["start_weights"] == {"from": "fresh"}
    assert (fold / CHECKPOINT_FINAL).is_file()
    assert "continuing from" not in runs["log"]
    assert "training.iterations_per_epoch changed 5 -> 2" in runs["log"]
    assert str(aside[0]) in runs["log"]
