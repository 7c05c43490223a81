"""The workflow's stages as the campaign sees them, the windows of a reference run, the moments.

A stage is a rule (``STAGE_OF_RULE``), a phase inside a training or prediction job (``JOB_PHASES``,
from a line of the job's log), or the time between jobs. ``draw_moments`` is stratified over the
stages, so that n moments >= the number of stages give every stage one.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

STAGE_OF_RULE = {
    "synthesize_dataset": "synthesize",
    "verify_dataset": "verify",
    "fingerprint": "fingerprint",
    "plan": "plan",
    "splits": "splits",
    "preprocess": "preprocess",
    "train": "training startup",
    "crossval": "crossval",
    "ensemble_cv": "ensembles",
    "ensemble_predictions": "test ensemble",
    "select": "selection",
    "predict": "prediction",
    "postprocess": "postprocessing",
    "evaluate_test": "test evaluation",
    "report": "report",
}
TRAINING = "training"
FINAL_VALIDATION = "final validation"
NPZ_EXPORT = "npz export"
PREDICTION_WRITING = "prediction writing"
BETWEEN_JOBS = "between jobs"
STAGE_ORDER = [
    "synthesize",
    "verify",
    "fingerprint",
    "plan",
    "splits",
    "preprocess",
    "training startup",
    TRAINING,
    FINAL_VALIDATION,
    NPZ_EXPORT,
    "crossval",
    "ensembles",
    "selection",
    "prediction",
    PREDICTION_WRITING,
    "test ensemble",
    "postprocessing",
    "test evaluation",
    "report",
    BETWEEN_JOBS,
]
# Phases of a job after its start, each from a line of the job's log. Training ("training
# startup": imports, data, network): the epochs (and their checkpoints) from the first "Epoch N"
# line; the final validation from the line written once checkpoint_final.pth is saved (predicting
# the first held-out case); the npz export from the line of the first case predicted (its export
# runs beside the next case's prediction) to the job's end (the summary). Prediction (model,
# input checks): writing the cases from the line of the first one written.
JOB_PHASES = {
    "train": (
        (TRAINING, re.compile(r": Epoch \d+$", re.M)),
        (FINAL_VALIDATION, re.compile(r"training (finished after|already finished)")),
        (NPZ_EXPORT, re.compile(r"validation: case 1/")),
    ),
    "predict": ((PREDICTION_WRITING, re.compile(r"^predict: case 1/", re.M)),),
}


@dataclass
class Job:
    rule: str
    jobid: str
    log: str  # relative to the run folder; "" for rules without a log (all)
    start: float
    end: float | None = None
    markers: dict[str, float] = field(default_factory=dict)  # when each phase began
    failed: bool = False

    @property
    def key(self) -> str:
        return f"{self.rule}:{self.log}"

    def stage_at(self, t: float) -> str:
        stage = STAGE_OF_RULE.get(self.rule, BETWEEN_JOBS)
        for phase, began in self.markers.items():
            if t >= began:
                stage = phase
        return stage


@dataclass
class Anchor:
    """An event of a run: ``kind`` start|marker:<phase>|finish of a job with ``key`` (or, with
    ``key`` None, of the first job of ``rule``), or ``begin``: the start of the run."""

    kind: str
    rule: str
    key: str | None


@dataclass
class Window:
    stage: str
    anchor: Anchor
    start: float  # seconds since the start of the reference run
    length: float
    what: str  # the job (or the job before a gap)


def stage_windows(jobs: list[Job], total: float) -> list[Window]:
    """Every job's window (split in its phases, JOB_PHASES) and every gap."""
    windows = []
    for job in jobs:
        if job.rule not in STAGE_OF_RULE or job.end is None:
            continue
        # A job's phases: (stage, anchor, start); one but for the rules of JOB_PHASES.
        phases = [(STAGE_OF_RULE[job.rule], Anchor("start", job.rule, job.key), job.start)]
        for phase, began in sorted(job.markers.items(), key=lambda item: item[1]):
            phases.append((phase, Anchor(f"marker:{phase}", job.rule, job.key), began))
        ends = [began for _, _, began in phases[1:]] + [job.end]
        for (stage, anchor, began), end in zip(phases, ends, strict=True):
            windows.append(Window(stage, anchor, began, end - began, job.key))
    # Gaps: nobody runs from one job's end to the next start; before the first job Snakemake
    # builds the DAG (and takes its lock).
    busy = sorted((j.start, j.end or total, j) for j in jobs if j.rule in STAGE_OF_RULE)
    if busy:
        windows.append(Window(BETWEEN_JOBS, Anchor("begin", "", None), 0.0, busy[0][0], "startup"))
    reach, last = 0.0, None
    for start, end, job in busy:
        if last is not None and start - reach > 0.05:
            windows.append(
                Window(
                    BETWEEN_JOBS,
                    Anchor("finish", last.rule, last.key),
                    reach,
                    start - reach,
                    f"after {last.key}",
                )
            )
        if end >= reach:
            reach, last = end, job
    return [w for w in windows if w.length > 0]


@dataclass
class Moment:
    index: int
    stage: str
    what: str
    anchor: Anchor
    fraction: float
    offset: float  # seconds after the anchor
    at: float  # the same moment in the reference run (seconds since its start)


def rules_not_run(jobs: list[Job]) -> list[str]:
    """Rules of the campaign's stages that a run did not run, so that no moment can hit them:
    ``ensemble_predictions`` runs only where the selection picks an ensemble (the campaign's
    workflow seed makes one win), ``synthesize_dataset`` not where the raw data exist."""
    ran = {job.rule for job in jobs}
    return [rule for rule in STAGE_OF_RULE if rule not in ran]


def draw_moments(
    windows: list[Window], n: int | None, seed: int, only: list[str] | None = None
) -> list[Moment]:
    """``n`` moments (None: one per stage), stratified over the stages (all of the reference's, or
    those of ``only`` that it has): shuffled stages taken in turn, so that the first k moments hit
    k different stages, then a window of that stage and a point 5-95 % into it, all from
    ``random.Random(seed)``."""
    rng = random.Random(seed)
    by_stage = windows_by_stage(windows)
    stages = [s for s in STAGE_ORDER if s in by_stage and (only is None or s in only)]
    moments: list[Moment] = []
    order: list[str] = []
    for index in range(len(stages) if n is None else n):
        if not order:
            order = stages[:]
            rng.shuffle(order)
        stage = order.pop()
        window = rng.choice(by_stage[stage])
        moments.append(moment_in(window, index, rng.uniform(0.05, 0.95)))
    return moments


def draw_chain(
    windows: list[Window], n: int | None, seed: int, only: list[str] | None = None
) -> list[Moment]:
    """``draw_moments`` with the first seed from ``seed`` on whose moments in the phases of a
    fold job (training, npz export) fall in one job. A chain kills its moments in the reference's
    order, and under other timing another fold's phase can come first (a fold that trained beside
    the killed one, done before the rerun): its kill never comes and the chain ends early, to
    start again from a fresh run. One job's npz export always follows its training.

    The training moment falls in the first half of its window: a run faster than the reference
    (less load beside it) must still be training there, else the fold can finish before the kill
    and the next moment, its npz export, never comes (a new chain, a whole run more)."""
    train_phases = {phase for phase, _ in JOB_PHASES["train"]}
    for attempt in range(seed, seed + 1000):
        moments = draw_moments(windows, n, attempt, only)
        if len({m.what for m in moments if m.stage in train_phases}) <= 1:
            return [_early_in_training(m, windows) for m in moments]
    msg = f"no seed from {seed} puts the training moments in one fold job"
    raise ValueError(msg)


def _early_in_training(moment: Moment, windows: list[Window]) -> Moment:
    """``moment`` moved into the first half of its window (5-50 % instead of 5-95 %) if it is a
    training moment; any other moment as it is."""
    if moment.stage != TRAINING:
        return moment
    window = next(
        w for w in windows if (w.stage, w.what, w.anchor) == (TRAINING, moment.what, moment.anchor)
    )
    return moment_in(window, moment.index, 0.05 + (moment.fraction - 0.05) / 2)


def redraw(moment: Moment, windows: list[Window], seed: int, attempt: int) -> Moment:
    """Another moment of ``moment``'s stage, for a kill that missed it (the job ended before the
    offset: a short job runs faster in one run than in another). The point is drawn from the
    first half of a window of that stage, where a short job is still running; the draw depends
    only on (seed, moment, attempt), so a campaign repeats."""
    rng = random.Random(f"{seed}:{moment.index}:{attempt}")
    window = rng.choice(windows_by_stage(windows)[moment.stage])
    return moment_in(window, moment.index, rng.uniform(0.05, 0.5))


def windows_by_stage(windows: list[Window]) -> dict[str, list[Window]]:
    by_stage: dict[str, list[Window]] = {}
    for window in windows:
        by_stage.setdefault(window.stage, []).append(window)
    return by_stage


def moment_in(window: Window, index: int, fraction: float) -> Moment:
    offset = fraction * window.length
    return Moment(
        index, window.stage, window.what, window.anchor, round(fraction, 3), offset,
        window.start + offset,
    )  # fmt: skip
