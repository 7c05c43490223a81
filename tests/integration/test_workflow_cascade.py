"""The cascade in the workflow: 3d_lowres and 3d_cascade_fullres trained, compared and predicted.

A synthetic dataset of 5 cases of 40 x 48 x 48 at 1 mm planned with a 0.02 GB GPU memory target
gets 3d_lowres with the next stage 3d_cascade_fullres (tests/integration/test_lowres_next_stage.py);
2 folds of one iteration. Every cascade fold reads the next-stage exports of every 3d_lowres fold
(written before that fold's validation summary), so its jobs depend on all lowres folds'
summaries; the selection compares both configurations and their pair; the cascade's test-set
prediction reads the 3d_lowres test predictions. The dry runs need only the plans (preprocessing
runs for real, ~20 s); the full run is slow (marked).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.plans import Plans
from nnunet_core.workflow.config import check_config, configurations_of_run
from tests.helpers.workflow import DATASET, snakemake, tiny_config

LOWRES, CASCADE = "3d_lowres", "3d_cascade_fullres"
MODEL = "nnUNetTrainerNoMirroring__nnUNetPlans__{}"
PLANS = Plans(
    {
        "configurations": {
            "2d": {},
            LOWRES: {"data_identifier": "lowres", "next_stage": CASCADE},
            "3d_fullres": {"data_identifier": "fullres"},
            CASCADE: {"inherits_from": "3d_fullres", "previous_stage": LOWRES},
        }
    }
)


def cascade_config(work: Path) -> dict:
    config = tiny_config(work)
    config["dataset"]["synthetic"].update(
        num_training=5, num_test=1, shape=[40, 48, 48], spacing=[1, 1, 1]
    )
    config["planning"]["gpu_memory_target_gb"] = 0.02
    config["planning"]["configurations"] = [LOWRES, CASCADE]
    config["splits"]["num_folds"] = 2
    # no test-time mirroring: the 0.02 GB target's tiny patches make mirrored validation and
    # prediction 8x slower, and the plumbing checked here does not depend on it
    config["training"].update(
        trainer="nnUNetTrainerNoMirroring",
        folds=[0, 1],
        epochs=1,
        iterations_per_epoch=1,
        val_iterations_per_epoch=1,
    )
    return config


def jobs(output: str) -> list[tuple[str, dict[str, str], str]]:
    """(rule, wildcards, input line) of every job a dry run lists."""
    found = []
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) \w+:\n)", "\n" + output):
        head = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):\n", block)
        if not head:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        inputs = re.search(r"^\s+input: (.*)$", block, re.M)
        pairs = dict(w.split("=", 1) for w in wildcards.group(1).split(", ")) if wildcards else {}
        found.append((head.group(1), pairs, inputs.group(1) if inputs else ""))
    return found


def train_jobs(listed) -> set[tuple[str, str]]:
    return {(w["configuration"], w["fold"]) for rule, w, _ in listed if rule == "train"}


def fold_summary(work: Path, configuration: str, fold: int) -> str:
    model = work / "results" / DATASET / MODEL.format(configuration)
    return str(model / f"fold_{fold}" / "validation" / "summary.json")


def test_the_run_configurations_include_the_cascade_and_check_its_needs() -> None:
    assert configurations_of_run(PLANS, None, [0, 1, 2, 3, 4], 5) == (
        ["2d", LOWRES, "3d_fullres", CASCADE],
        [],
    )
    chosen, notices = configurations_of_run(PLANS, None, [0, 1], 5)
    assert chosen == ["2d", LOWRES, "3d_fullres"]
    assert notices == [
        f"{CASCADE} left out: it trains on {LOWRES}'s predictions of every training case, which "
        "needs every fold 0-4 in training.folds (missing: 2, 3, 4)"
    ]
    assert configurations_of_run(PLANS, [LOWRES, CASCADE], [1, 0, "all"], 2) == (
        [LOWRES, CASCADE],
        [],
    )
    with pytest.raises(ConfigurationError, match=f"{CASCADE} trains on the predictions of its "):
        configurations_of_run(PLANS, ["3d_fullres", CASCADE], [0, 1], 2)
    with pytest.raises(ConfigurationError, match="training.folds: .* add fold.s. 1 "):
        configurations_of_run(PLANS, [LOWRES, CASCADE], [0], 2)


def test_cascade_without_lowres_is_one_line_before_any_job(tmp_path) -> None:
    config = cascade_config(tmp_path / "work")
    config["planning"]["configurations"] = ["3d_fullres", CASCADE]
    with pytest.raises(ConfigurationError, match=f"list {LOWRES} too"):
        check_config(config)
    result = snakemake(tmp_path, config, "-n", check=False)
    assert result.returncode != 0
    assert f"{CASCADE} trains on the predictions of its previous stage {LOWRES}: list" in (
        result.stdout + result.stderr
    )
    assert not (tmp_path / "work").exists()


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Preprocessed for real (synthesize .. preprocess): the plans decide the DAG."""
    workdir = tmp_path_factory.mktemp("cascade_dag")
    config = cascade_config(workdir / "work")
    snakemake(workdir, config, "preprocessed")
    return workdir, config


def test_dry_run_after_planning_shows_the_cascade_after_every_lowres_fold(planned_run) -> None:
    workdir, config = planned_run
    work = Path(config["work_dir"])
    preprocessed = work / "preprocessed" / DATASET
    plans = json.loads((preprocessed / "nnUNetPlans.json").read_text())
    assert plans["configurations"][CASCADE]["previous_stage"] == LOWRES
    # the cascade's data is 3d_fullres's, preprocessed although 3d_fullres is not trained
    assert (preprocessed / "nnUNetPlans_3d_fullres" / "preprocess_summary.json").is_file()
    listed = jobs(snakemake(workdir, config, "-n").stdout)
    assert train_jobs(listed) == {(c, f) for c in (LOWRES, CASCADE) for f in ("0", "1")}
    lowres_summaries = [fold_summary(work, LOWRES, f) for f in (0, 1)]
    for rule, wildcards, inputs in listed:
        if rule == "train":
            depends = [s in inputs.split(", ") for s in lowres_summaries]
            assert depends == [wildcards["configuration"] == CASCADE] * 2, wildcards
    assert sorted(w["configuration"] for r, w, _ in listed if r == "crossval") == sorted(
        [LOWRES, CASCADE]
    )
    assert [w for r, w, _ in listed if r == "ensemble_cv"] == [{"first": LOWRES, "second": CASCADE}]
    assert [r for r, _, _ in listed].count("select") == 1


def cascade_predictions(work: Path) -> Path:
    return work / "predictions" / DATASET / CASCADE


@pytest.fixture(scope="module")
def finished_run(planned_run) -> tuple[Path, dict, float, str]:
    """The whole run, plus the cascade's test-set predictions whichever candidate wins."""
    workdir, config = planned_run
    start = time.monotonic()
    result = snakemake(workdir, config, "all", str(cascade_predictions(Path(config["work_dir"]))))
    return workdir, config, time.monotonic() - start, result.stdout + result.stderr


@pytest.mark.slow
def test_real_run_compares_the_cascade_and_predicts_it_from_lowres(finished_run) -> None:
    workdir, config, wall, output = finished_run
    print(f"cascade workflow run: {wall:.0f} s wall")
    work = Path(config["work_dir"])
    results = work / "results" / DATASET
    info = json.loads((results / "inference_information.json").read_text())
    pair = f"ensemble___{MODEL.format(LOWRES)}___{MODEL.format(CASCADE)}___0_1"
    assert set(info["all_results"]) == {MODEL.format(LOWRES), MODEL.format(CASCADE), pair}
    predictions = work / "predictions" / DATASET
    assert sorted(p.name for p in (predictions / LOWRES).glob("*.nii.gz"))
    assert sorted(p.name for p in cascade_predictions(work).glob("*.nii.gz")) == sorted(
        p.name for p in (predictions / LOWRES).glob("*.nii.gz")
    )
    args = json.loads((cascade_predictions(work) / "predict_from_raw_data_args.json").read_text())
    assert Path(args["prev_stage_predictions"]) == predictions / LOWRES
    assert (results / "report" / "training_curves" / f"training_curves_{CASCADE}.png").is_file()


@pytest.mark.slow
def test_deleting_one_lowres_checkpoint_reruns_it_and_every_cascade_fold_only(
    finished_run,
) -> None:
    workdir, config, _, _ = finished_run
    work = Path(config["work_dir"])
    summary = Path(fold_summary(work, LOWRES, 1))
    checkpoint = summary.parents[1] / "checkpoint_final.pth"
    saved, saved_summary, times = checkpoint.read_bytes(), summary.read_bytes(), summary.stat()
    checkpoint.unlink()

    def dry_run():
        return snakemake(
            workdir,
            config,
            "all",
            str(cascade_predictions(work)),  # targets first: --rerun-triggers takes several words
            "-n",
            "--rerun-triggers",
            "mtime",
        )

    try:
        # the train rule declares only the summary: a run removes a summary whose weights are
        # gone (workflow.fold_weights), a dry run says so and leaves it
        first = dry_run()
        line = f"__{LOWRES}/fold_1: no checkpoint_final.pth; a run (not this dry run) trains it"
        assert line in first.stderr, first.stderr
        assert summary.is_file()
        summary.unlink()
        output = dry_run().stdout
    finally:
        checkpoint.write_bytes(saved)
        summary.write_bytes(saved_summary)  # as it was, its time too (the other tests' DAG)
        os.utime(summary, ns=(times.st_atime_ns, times.st_mtime_ns))
    listed = jobs(output)
    assert train_jobs(listed) == {(LOWRES, "1"), (CASCADE, "0"), (CASCADE, "1")}
    rules = [rule for rule, _, _ in listed]
    assert sorted(w["configuration"] for r, w, _ in listed if r == "crossval") == sorted(
        [LOWRES, CASCADE]
    )
    assert rules.count("ensemble_cv") == 1 and rules.count("select") == 1
    assert "report" in rules
    predicts = {w["configuration"]: inputs for rule, w, inputs in listed if rule == "predict"}
    assert set(predicts) == {LOWRES, CASCADE}
    lowres_predictions = str(work / "predictions" / DATASET / LOWRES)
    assert lowres_predictions in predicts[CASCADE].split(", ")
