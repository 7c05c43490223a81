"""Our side of the pipeline benchmark: the real workflow (`snakemake --cores N`) on a copy of the
raw dataset, with a config that names the dataset, the configurations, the folds and the short
schedule and leaves every other key at the schema default (what a user's own dataset gets).

Stages come from the jobs themselves: each job is a shell that Snakemake starts, seen by the
sampler from its first to its last sample and labelled by its `nnunet-core <command>`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.speed.pipeline.monitor import MB, TreeSampler, run_parallel
from benchmarks.speed.pipeline.stages import (
    StageFigures,
    fold_log_phases,
    ours_stage,
    stages_from_jobs,
    union_seconds,
)
from benchmarks.speed.pipeline.upstream import Schedule

REPO = Path(__file__).resolve().parents[3]
TRAIN_ARGS = re.compile(r"nnunet-core train (\S+) (\S+) (\S+)")


@dataclass(frozen=True)
class OursRun:
    """Where one run of our workflow lives and what it runs."""

    root: Path
    dataset: str
    dataset_id: int
    dataset_name: str
    configurations: tuple[str, ...]
    folds: tuple[int, ...]
    schedule: Schedule
    cores: int

    @property
    def raw_root(self) -> Path:
        return self.root / "raw"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def config_file(self) -> Path:
        return self.root / "config.yaml"


def workflow_config(run: OursRun) -> dict:
    """The user's config: dataset, configurations, folds, schedule, the CPU; defaults else."""
    return {
        "work_dir": str(run.work),
        "dataset": {"id": run.dataset_id, "name": run.dataset_name, "raw_root": str(run.raw_root)},
        "planning": {"configurations": list(run.configurations)},
        "training": {
            "folds": list(run.folds),
            "epochs": run.schedule.epochs,
            "iterations_per_epoch": run.schedule.iterations,
            "val_iterations_per_epoch": run.schedule.val_iterations,
            "device": "cpu",
        },
    }


def snakemake_command(run: OursRun) -> list[str]:
    """`snakemake --cores N --configfile ...` from this interpreter's venv (as the README)."""
    return [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(run.root),
        "--configfile",
        str(run.config_file),
        "--cores",
        str(run.cores),
    ]


def prepare(run: OursRun, raw_dataset: Path) -> None:
    """A fresh run folder holding a copy of the raw dataset and the config file."""
    if run.root.exists():
        shutil.rmtree(run.root)
    shutil.copytree(raw_dataset, run.raw_root / run.dataset)
    run.config_file.write_text(yaml.safe_dump(workflow_config(run)))


def run_ours(run: OursRun, raw_dataset: Path) -> dict:
    """The whole workflow under one sampler; per-stage figures from its jobs, and the total."""
    prepare(run, raw_dataset)
    with TreeSampler(os.getpid(), job_depth=2, label=ours_stage) as sampler:
        total = run_parallel(
            [snakemake_command(run)], 1, run.root / "snakemake_log", sampler=sampler
        )
    if total.returncodes != [0]:
        raise RuntimeError(f"our workflow failed: see {run.root / 'snakemake_log'}")
    jobs = list(sampler.jobs.values())
    labels = {j.label for j in jobs}
    peaks = {label: sampler.peak_rss(label) / MB for label in labels}
    figures = {k: v.as_dict() for k, v in stages_from_jobs(jobs, peaks).items()}
    figures["total"] = StageFigures(
        total.wall_s, total.cpu_s, total.peak_rss_mb, len(jobs)
    ).as_dict()
    t0 = min((s.time for s in sampler.samples), default=0.0)
    return {
        "stages": figures,
        "selected": selected_configurations(run),
        "scheduler": {
            "seconds_without_any_job": round(
                total.wall_s - union_seconds((j.start, j.end) for j in jobs), 2
            ),
            "snakemake_own_cpu_s_sampled": round(sampler.overhead_cpu, 2),
            "cpu_s_not_in_jobs": round(total.cpu_s - sum(j.cpu for j in jobs), 2),
            "snakemake_rss_mb_peak": round(sampler.peak_rss("overhead") / MB, 1),
        },
        "jobs": [
            {
                "stage": j.label,
                "command": job_command(j.argv),
                "start_s": round(j.start - t0, 2),
                "seconds": round(j.end - j.start, 2),
                "cpu_s": round(j.cpu, 2),
                "cpu_exact": j.cpu_exact,
                "peak_mb": round(j.peak_rss / MB, 1),
            }
            for j in sorted(jobs, key=lambda j: j.start)
        ],
        "folds": fold_phases(run, jobs),
        "command": snakemake_command(run),
    }


def job_command(argv: tuple[str, ...]) -> str:
    """The `nnunet-core ...` part of a job's shell line, shortened for the record."""
    text = " ".join(argv)
    start = text.find("nnunet-core")
    return text[start if start >= 0 else 0 :][:120]


def selected_configurations(run: OursRun) -> list[str]:
    """Configurations of the model or ensemble our selection chose."""
    import json

    found = sorted(run.work.glob(f"results/{run.dataset}/inference_information.json"))
    if not found:
        return []
    chosen = json.loads(found[0].read_text())["best_model_or_ensemble"]
    return [m["configuration"] for m in chosen["selected_model_or_models"]]


def fold_phases(run: OursRun, jobs: list) -> list[dict]:
    """Per fold: start-up (job start to the first log line), training, validation seconds."""
    phases = []
    for job in jobs:
        match = TRAIN_ARGS.search(" ".join(job.argv))
        if job.label != "training" or not match:
            continue
        _, configuration, fold = match.groups()
        log = run.work / "logs" / run.dataset / f"train_{configuration}_fold{fold}.log"
        parsed = fold_log_phases(log.read_text()) if log.exists() else None
        if parsed:
            parsed["startup_s"] = parsed["first_line"] - job.start
            parsed["after_validation_s"] = job.end - parsed["last_line"]
            phases.append({"configuration": configuration, "fold": int(fold), **parsed})
    return phases
