"""The fault campaign's checks can fail (benchmarks/faults/): half-written files, the manifest,
the stages a draw aims at, the totals. The campaign itself (SIGKILL at moments in five stages,
the same command again, the end state equal to the uninterrupted run's) runs at the end of
tests/integration/test_workflow_pipeline.py, whose run is its reference."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from benchmarks.faults.campaign import MomentResult, hit_its_stage, stages_of, totals
from benchmarks.faults.outputs import compare_manifests, half_written, manifest
from benchmarks.faults.stages import (
    BETWEEN_JOBS,
    NPZ_EXPORT,
    PREDICTION_WRITING,
    TRAINING,
    Job,
    draw_chain,
    draw_moments,
    redraw,
    rules_not_run,
    stage_windows,
)


def test_half_written_finds_temporaries_truncated_and_empty_files(tmp_path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "ok.json").write_text("{}")
    (tmp_path / "work" / ".summary.json.k3j_a9x2.json").write_text("{}")  # io.atomic temporary
    (tmp_path / "work" / "plans.json").write_text('{"configurations": {')
    (tmp_path / "work" / "empty.json").write_text("")
    with gzip.open(tmp_path / "work" / "case.nii.gz", "wb") as handle:
        handle.write(b"\0" * 4096)
    data = (tmp_path / "work" / "case.nii.gz").read_bytes()
    (tmp_path / "work" / "case.nii.gz").write_bytes(data[: len(data) // 2])
    (tmp_path / "work" / ".snakemake_timestamp").write_text("")
    problems = half_written(tmp_path)
    assert len(problems) == 4, problems
    for name in (".summary.json.k3j_a9x2.json", "plans.json", "empty.json", "case.nii.gz"):
        assert any(p.startswith(f"work/{name}:") for p in problems), (name, problems)


def test_manifest_ignores_logs_and_timings_but_not_results(tmp_path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for root, seconds, log in ((first, 0.1, "run 1"), (second, 0.2, "run 2")):
        pre = root / "work" / "preprocessed" / "D" / "nnUNetPlans_2d"
        pre.mkdir(parents=True)
        summary = {"cases": [{"case": "a", "seconds": seconds}], "seconds": seconds}
        (pre / "preprocess_summary.json").write_text(json.dumps(summary))
        (pre / "plans.json").write_text('{"patch_size": [28, 24]}')
        (root / "work" / "logs").mkdir()
        (root / "work" / "logs" / "plan.log").write_text(log)
        report = root / "work" / "results" / "D" / "report"
        report.mkdir(parents=True)  # the measured data-wait shares differ, nothing else
        page = f"# R\n\n## Data loading\n\n- waited {seconds} s\n\n## Notes\n\n- n\n"
        (report / "report.md").write_text(page)
    assert compare_manifests(manifest(first), manifest(second)) == []
    page = second / "work" / "results" / "D" / "report" / "report.md"
    page.write_text(page.read_text().replace("- n", "- other"))
    assert compare_manifests(manifest(first), manifest(second))[0].startswith("different: ")
    page.write_text(page.read_text().replace("- other", "- n"))
    (second / "work" / "preprocessed" / "D" / "nnUNetPlans_2d" / "plans.json").write_text(
        '{"patch_size": [28, 28]}'
    )
    shutil.copy(first / "work" / "logs" / "plan.log", second / "work" / "extra.txt")
    assert compare_manifests(manifest(first), manifest(second)) == [
        "extra: work/extra.txt",
        "different: work/preprocessed/D/nnUNetPlans_2d/plans.json "
        f"({manifest(first)['work/preprocessed/D/nnUNetPlans_2d/plans.json'][:40]} vs "
        f"{manifest(second)['work/preprocessed/D/nnUNetPlans_2d/plans.json'][:40]})",
    ]


def test_a_new_report_removes_a_killed_report_writers_temporaries(tmp_path) -> None:
    """What the report rule found: a report killed while writing cv_dice.png left io.atomic's
    temporary in results/D/report (a folder no rule declares), and the next report kept it."""
    from nnunet_core.report.build import _remove_stale

    report = tmp_path / "report"
    (report / "training_curves").mkdir(parents=True)
    left = [
        report / ".cv_dice.png.c8g_kbhu.png",
        report / ".report.md.x1y2z3w4.tmp",
        report / "training_curves" / ".training_curves_2d.png.ab_cd123.png",
    ]
    other = report / ".not_ours"
    for path in [*left, other]:
        path.write_bytes(b"half")
    _remove_stale(report, written=[])
    assert [p for p in left if p.exists()] == [] and other.exists()


def reference_jobs() -> list[Job]:
    """One job per rule of the demo run, back to back (times in seconds), training and
    prediction with their phase markers."""
    rules = ["synthesize_dataset", "verify_dataset", "fingerprint", "plan", "splits",
             "preprocess", "train", "crossval", "ensemble_cv", "ensemble_predictions", "select",
             "predict", "postprocess", "evaluate_test", "report"]  # fmt: skip
    jobs, t = [], 1.0
    for number, rule in enumerate(rules):
        job = Job(rule, str(number), f"logs/{rule}.log", start=t, end=t + 2.0)
        if rule == "train":
            job.markers = {TRAINING: t + 0.5, NPZ_EXPORT: t + 1.5}
        if rule == "predict":
            job.markers = {PREDICTION_WRITING: t + 1.0}
        jobs.append(job)
        t += 2.5  # a gap between jobs
    return jobs


def test_the_default_draw_aims_at_every_stage_preprocess_ensembles_and_report_included() -> None:
    windows = stage_windows(reference_jobs(), total=40.0)
    stages = stages_of(windows)
    assert {"preprocess", "ensembles", "test ensemble", "report", BETWEEN_JOBS} <= set(stages)
    for seed in range(5):
        moments = draw_moments(windows, None, seed)
        assert sorted(m.stage for m in moments) == sorted(stages), seed


def test_a_chain_puts_its_training_moments_in_one_fold_job() -> None:
    """Two fold jobs: some seeds put training and npz export in different folds, whose order
    a run may change; draw_chain skips them."""
    jobs = reference_jobs()
    first = next(j for j in jobs if j.rule == "train")  # a second fold beside it
    jobs.append(Job("train", "99", "logs/train_other.log", first.start + 0.1, first.end + 0.1))
    jobs[-1].markers = {phase: t + 0.1 for phase, t in first.markers.items()}
    windows = stage_windows(jobs, total=40.0)
    stages = [TRAINING, NPZ_EXPORT]

    def folds(moments: list) -> set[str]:
        return {m.what for m in moments}

    split = [s for s in range(40) if len(folds(draw_moments(windows, 2, s, stages))) == 2]
    assert split, "every seed happened to pick one fold: the check below proves nothing"
    for seed in split:
        chain = draw_chain(windows, 2, seed, stages)
        assert len(folds(chain)) == 1 and sorted(m.stage for m in chain) == sorted(stages)
        training = next(m for m in chain if m.stage == TRAINING)  # a faster run still trains
        assert 0.05 <= training.fraction <= 0.5, training
        assert chain == draw_chain(windows, 2, seed, stages)  # a campaign repeats


def test_a_moment_that_missed_its_stage_is_drawn_again_in_that_stage() -> None:
    windows = stage_windows(reference_jobs(), total=40.0)
    report = next(m for m in draw_moments(windows, None, 3) if m.stage == "report")
    again = redraw(report, windows, seed=3, attempt=1)
    assert (again.stage, again.index) == ("report", report.index)
    assert 0.05 <= again.fraction <= 0.5  # early in the job, while a short job still runs
    assert again == redraw(report, windows, seed=3, attempt=1)  # a campaign repeats
    assert again.offset != redraw(report, windows, seed=3, attempt=2).offset


def test_the_totals_name_the_stages_no_kill_hit() -> None:
    windows = stage_windows(reference_jobs(), total=40.0)
    moments = {m.stage: m for m in draw_moments(windows, None, 0)}

    def result(stage: str, hit: list[str]) -> MomentResult:
        return MomentResult(
            moments[stage], True, 1.0, hit, [], -9, 0, True, False, [], [], [], 10.0
        )

    results = [result("preprocess", ["preprocess"]), result("report", [BETWEEN_JOBS])]
    assert hit_its_stage(results[0]) and not hit_its_stage(results[1])
    missed = totals(results, stages_of(windows))["stages not hit"]
    assert "report" in missed and "ensembles" in missed and "preprocess" not in missed


def test_rules_the_reference_did_not_run_are_named() -> None:
    """A rule that did not run has no window, so no moment can hit it: the campaign says so."""
    jobs = [job for job in reference_jobs() if job.rule != "ensemble_predictions"]
    assert rules_not_run(jobs) == ["ensemble_predictions"]
    assert rules_not_run(reference_jobs()) == []


def test_an_epoch_started_twice_in_a_fold_is_named(tmp_path: Path) -> None:
    """The check behind 'a kill after the last epoch costs no epoch': each attempt's log."""
    from benchmarks.faults.epochs import repeated_epochs

    fold = tmp_path / "work" / "results" / "D" / "M" / "fold_0"
    fold.mkdir(parents=True)
    (fold / "training_log_1.txt").write_text("2026: Epoch 0\n2026: Epoch 1\n")
    assert repeated_epochs(tmp_path) == []
    (fold / "training_log_2.txt").write_text("2026: training already finished (2 epochs)\n")
    assert repeated_epochs(tmp_path) == []
    (fold / "training_log_3.txt").write_text("2026: Epoch 1\n")
    assert repeated_epochs(tmp_path) == ["work/results/D/M/fold_0: epoch 1 trained 2 times"]


def test_only_the_fold_the_moment_aimed_at_is_held_to_no_repeat(tmp_path: Path) -> None:
    """A fold training beside the one whose validation was hit may repeat the epoch it was in."""
    from benchmarks.faults.epochs import fold_of_job, repeated_epochs

    beside = tmp_path / "work" / "results" / "D" / "T__P__3d_fullres" / "fold_1"
    beside.mkdir(parents=True)
    (beside / "training_log_1.txt").write_text("2026: Epoch 1\n")
    (beside / "training_log_2.txt").write_text("2026: Epoch 1\n")
    aimed = fold_of_job("train:work/logs/D/train_2d_fold0.log")
    assert aimed == "__2d/fold_0"
    assert repeated_epochs(tmp_path, aimed) == []
    assert repeated_epochs(tmp_path, fold_of_job("train:work/logs/D/train_3d_fullres_fold1.log"))
    assert fold_of_job("predict:work/logs/D/predict_2d.log") is None


def test_a_lock_file_left_in_the_run_folder_is_a_stale_lock(tmp_path: Path) -> None:
    """What makes the rerun run ``--unlock`` first: Snakemake's lock files (its file backend
    writes <n>.input.lock and <n>.output.lock, and a run that ends removes the folder)."""
    from benchmarks.faults.snakemake_run import has_stale_lock

    assert not has_stale_lock(tmp_path)
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    assert not has_stale_lock(tmp_path)
    (locks / "0.output.lock").write_text("work/results/D/report/report.md\n")
    assert has_stale_lock(tmp_path)
