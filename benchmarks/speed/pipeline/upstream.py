"""Upstream's side of the pipeline benchmark: nnU-Net v2's CLI chain run as a user runs it.

Each stage is one command (folds: one command per configuration and fold, ``parallel`` at a time,
as many as our workflow runs at once), started from the peer venv's console scripts with the
nnU-Net environment variables pointing into this run's folder. The short schedule is a trainer
class written into the peer venv at run time (upstream finds trainers by class name inside
``nnunetv2.training.nnUNetTrainer``; the top level avoids importing its optional sub-packages).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.peer.trainer import install_trainer_source, trainer_source
from benchmarks.speed.pipeline.monitor import RunResult, TreeSampler, run_parallel
from benchmarks.speed.pipeline.stages import StageFigures, fold_log_phases, upstream_stage


@dataclass(frozen=True)
class Schedule:
    """The short training schedule both sides run."""

    epochs: int
    iterations: int
    val_iterations: int

    @property
    def trainer_name(self) -> str:
        return f"nnUNetTrainer_Bench{self.epochs}x{self.iterations}v{self.val_iterations}"


@dataclass(frozen=True)
class UpstreamRun:
    """Where one upstream run lives and what it runs."""

    peer: Path
    root: Path
    dataset: str
    dataset_id: int
    configurations: tuple[str, ...]
    folds: tuple[int, ...]
    schedule: Schedule
    cores: int
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def raw(self) -> Path:
        return self.root / "nnUNet_raw"

    @property
    def results(self) -> Path:
        return self.root / "nnUNet_results" / self.dataset

    @property
    def predictions(self) -> Path:
        return self.root / "predictions"

    def tool(self, name: str) -> str:
        return str(self.peer / "bin" / name)


def install_trainer(peer: Path, schedule: Schedule) -> Path:
    """Write the schedule's trainer class into the peer venv's trainer package."""
    source = trainer_source(
        schedule.trainer_name,
        schedule.epochs,
        schedule.iterations,
        schedule.val_iterations,
        writer="benchmarks/speed/pipeline/",
    )
    return install_trainer_source(peer, schedule.trainer_name, source)


def peer_environment(run: UpstreamRun) -> dict[str, str]:
    """The environment a user of the peer venv has (../shared/peer/env.sh), for this run."""
    env = dict(os.environ)
    env.update(
        PATH=f"{run.peer / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(run.peer),
        nnUNet_raw=str(run.raw),
        nnUNet_preprocessed=str(run.root / "nnUNet_preprocessed"),
        nnUNet_results=str(run.root / "nnUNet_results"),
        nnUNet_compile="false",
    )
    env.update(run.extra_env)
    return env


def plan_command(run: UpstreamRun) -> list[str]:
    """Plan and preprocess with the integrity check (our workflow always verifies)."""
    return [
        run.tool("nnUNetv2_plan_and_preprocess"),
        "-d",
        str(run.dataset_id),
        "-c",
        *run.configurations,
        "-np",
        str(run.cores),
        "--verify_dataset_integrity",
    ]


def train_commands(run: UpstreamRun) -> list[list[str]]:
    """One `nnUNetv2_train` per configuration and fold, with --npz (selection needs it)."""
    return [
        [
            run.tool("nnUNetv2_train"),
            str(run.dataset_id),
            configuration,
            str(fold),
            "-tr",
            run.schedule.trainer_name,
            "-device",
            "cpu",
            "--npz",
        ]
        for configuration in run.configurations
        for fold in run.folds
    ]


def selection_command(run: UpstreamRun) -> list[str]:
    return [
        run.tool("nnUNetv2_find_best_configuration"),
        str(run.dataset_id),
        "-c",
        *run.configurations,
        "-tr",
        run.schedule.trainer_name,
        "-f",
        *(str(f) for f in run.folds),
        "-np",
        str(run.cores),
    ]


def selected_models(run: UpstreamRun) -> tuple[list[str], dict]:
    """Configurations of the selected model or ensemble, and inference_information.json."""
    information = json.loads((run.results / "inference_information.json").read_text())
    chosen = information["best_model_or_ensemble"]["selected_model_or_models"]
    return [m["configuration"] for m in chosen], information


def inference_commands(run: UpstreamRun) -> dict[str, list[list[str]]]:
    """The commands upstream's inference_instructions.txt prints, filled in (-device cpu; the
    -np of the machine's cores instead of its default 8)."""
    configurations, information = selected_models(run)
    best = information["best_model_or_ensemble"]
    ensemble = len(configurations) > 1
    outputs = [run.predictions / c for c in configurations]
    predict = [
        [
            run.tool("nnUNetv2_predict"),
            "-d",
            run.dataset,
            "-i",
            str(run.raw / run.dataset / "imagesTs"),
            "-o",
            str(out),
            "-f",
            *(str(f) for f in run.folds),
            "-tr",
            run.schedule.trainer_name,
            "-c",
            configuration,
            "-p",
            "nnUNetPlans",
            "-device",
            "cpu",
            *(["--save_probabilities"] if ensemble else []),
        ]
        for configuration, out in zip(configurations, outputs, strict=True)
    ]
    merged = run.predictions / "ensemble" if ensemble else outputs[0]
    ensembling = (
        [
            [
                run.tool("nnUNetv2_ensemble"),
                "-i",
                *map(str, outputs),
                "-o",
                str(merged),
                "-np",
                str(run.cores),
            ]
        ]
        if ensemble
        else []
    )
    final = run.predictions / "final"
    postprocessing = [
        [
            run.tool("nnUNetv2_apply_postprocessing"),
            "-i",
            str(merged),
            "-o",
            str(final),
            "-pp_pkl_file",
            best["postprocessing_file"],
            "-np",
            str(run.cores),
            "-plans_json",
            best["some_plans_file"],
        ]
    ]
    evaluation = [
        [
            run.tool("nnUNetv2_evaluate_folder"),
            str(run.raw / run.dataset / "labelsTs"),
            str(final),
            "-djfile",
            str(Path(best["some_plans_file"]).with_name("dataset.json")),
            "-pfile",
            best["some_plans_file"],
            "-np",
            str(run.cores),
        ]
    ]
    return {
        "prediction": predict,
        "ensembling": ensembling,
        "postprocessing": postprocessing,
        "evaluation": evaluation,
    }


def prepare(run: UpstreamRun, raw_dataset: Path) -> None:
    """A fresh run folder holding a copy of the raw dataset."""
    if run.root.exists():
        shutil.rmtree(run.root)
    shutil.copytree(raw_dataset, run.raw / run.dataset)
    install_trainer(run.peer, run.schedule)


def run_upstream(run: UpstreamRun, raw_dataset: Path) -> dict:
    """The whole chain, stage by stage, under one sampler; per-stage and total figures."""
    prepare(run, raw_dataset)
    env = peer_environment(run)
    logs = run.root / "logs"
    stages: dict[str, RunResult] = {}
    with TreeSampler(os.getpid(), job_depth=1, label=upstream_stage) as sampler:

        def stage(name: str, commands: list[list[str]], parallel: int = 1) -> None:
            if not commands:
                return
            result = run_parallel(commands, parallel, logs / name, env=env, sampler=sampler)
            stages[name] = result
            if any(result.returncodes):
                raise RuntimeError(f"upstream {name} failed: see {logs / name}")

        stage("plan_preprocess", [plan_command(run)])
        stage("training", train_commands(run), parallel=run.cores)
        stage("selection", [selection_command(run)])
        for name, commands in inference_commands(run).items():
            stage(name, commands)
    figures = {
        name: StageFigures(r.wall_s, r.cpu_s, r.peak_rss_mb, len(r.returncodes)).as_dict()
        for name, r in stages.items()
    }
    figures["total"] = StageFigures(
        sum(r.wall_s for r in stages.values()),
        sum(r.cpu_s for r in stages.values()),
        max(r.peak_rss_mb for r in stages.values()),
        sum(len(r.returncodes) for r in stages.values()),
    ).as_dict()
    return {
        "stages": figures,
        "selected": selected_models(run)[0],
        "folds": fold_phases(run, sampler),
        "commands": {
            "plan_preprocess": [plan_command(run)],
            "training": train_commands(run),
            "selection": [selection_command(run)],
            **inference_commands(run),
        },
    }


def fold_phases(run: UpstreamRun, sampler: TreeSampler) -> list[dict]:
    """Per fold: start-up (process start to the first log line), training, validation seconds."""
    starts = {
        (j.argv[j.argv.index("-tr") - 2], j.argv[j.argv.index("-tr") - 1]): j.start
        for j in sampler.jobs.values()
        if j.label == "training" and "-tr" in j.argv
    }
    phases = []
    for (configuration, fold), start in sorted(starts.items()):
        folder = run.results / f"{run.schedule.trainer_name}__nnUNetPlans__{configuration}"
        logs = sorted((folder / f"fold_{fold}").glob("training_log_*.txt"))
        parsed = fold_log_phases(logs[-1].read_text()) if logs else None
        if parsed:
            parsed["startup_s"] = parsed["first_line"] - start
            phases.append({"configuration": configuration, "fold": int(fold), **parsed})
    return phases
