"""What every part of the GPU check shares: the row, sizes and budgets, the context, ``guarded``.

Its own module so that ``check.py`` (which runs the sections) and the sections (which make rows)
both import it and never each other.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE_PLANS = ROOT / "tests" / "data" / "plans" / "synth3d_peer900" / "nnUNetPlans.json"
CONFIGURATIONS = ("2d", "3d_fullres")


@dataclass
class Row:
    """One measurement; ``value`` None means the row failed or was skipped (``note`` says why)."""

    section: str
    what: str
    value: float | None
    unit: str
    note: str = ""

    def __post_init__(self) -> None:
        self.note = " ".join(self.note.split())  # one line in the table, tracebacks included


@dataclass(frozen=True)
class Profile:
    """Sizes and budgets: the GPU's, or tiny CPU ones for ``--dry-run`` (CI)."""

    dry_run: bool
    device: str
    steps: int  # timed train steps per measurement
    warmup: int
    budgets: dict[str, float]  # seconds per section
    loader_cases: int
    case_shape: tuple[int, int, int]
    loader_batches: int
    loader_workers: int
    fold_counts: tuple[int, ...]
    fold_seconds: float  # how long the concurrent folds train together
    predict_shape: tuple[int, int, int]
    compile_backend: str
    threads: int  # torch threads per process; 0: torch's default


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def make_profile(dry_run: bool, device: str) -> Profile:
    """GPU budgets add up to 440 s, inside gpu_check.sh's 470 s cut and the 8-minute limit."""
    if dry_run:  # ceilings for a loaded 2-core CI machine, not targets
        budgets = dict(train=120, loader=120, folds=180, predict=120, compile=180, ddp=120)
        return Profile(
            True, device, 2, 1, budgets, 2, (12, 24, 24), 4, 2, (1, 2, 5), 0.5, (8, 24, 24),
            "aot_eager", 1,
        )  # fmt: skip
    budgets = dict(train=90, loader=70, folds=130, predict=30, compile=90, ddp=30)  # 440 s
    return Profile(
        False, device, 20, 5, budgets, 8, (64, 112, 128), 200, cpu_count(), (1, 2, 5), 15.0,
        (96, 192, 192), "inductor", 0,
    )  # fmt: skip


@dataclass
class Context:
    """What sections share: the profile, plans, scratch folder and earlier results."""

    profile: Profile
    plans: dict[str, Any]
    work: Path
    peer_python: str | None
    step_seconds: dict[str, float] = field(default_factory=dict)  # ours, per configuration
    deadline: float = 0.0  # of the running section (time.monotonic)

    def time_left(self) -> float:
        return self.deadline - time.monotonic()


def guarded(rows: list[Row], section: str, what: str, measure: Callable[[], list[Row]]) -> None:
    """Append ``measure()``'s rows, or one row with its error; skip when the budget is spent."""
    try:
        rows += measure()
    except Exception as error:  # noqa: BLE001 - a failure is a row, not a crash
        print(traceback.format_exc(), flush=True)
        rows.append(Row(section, what, None, "", f"error: {type(error).__name__}: {error}"[:300]))
