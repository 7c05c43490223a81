#!/usr/bin/env python
"""One GPU check: train step, loader vs GPU, folds on one GPU, prediction, compile, DDP, real size.

    bash benchmarks/gpu_check.sh                 # on the GPU machine (< 10 minutes)
    bash benchmarks/gpu_check.sh --dry-run       # the same code paths on the CPU, tiny sizes

Each section has its own time budget and fails on its own: a failure is a row with the error, so
one broken section never hides the others. Rows are (section, what, value, unit, note); the table
is printed and written as JSON after every section, so a run killed by the total budget still
leaves what it measured. Sizes come from the reference plans (tests/data/plans/synth3d_peer900);
``--dry-run`` shrinks them to three stages of eight features so that the CPU finishes in seconds.
The real-size sections (``realscale/sections.py``) plan their own data, made on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.gpu.context import (
    CONFIGURATIONS,
    REFERENCE_PLANS,
    Context,
    Profile,
    Row,
    cpu_count,
    make_profile,
    tiny_configuration,
)

TABLE_START = "== gpu_check table =="
TABLE_END = "== end of table =="


# ------------------------------------------------------------------------------- plans
def load_plans(dry_run: bool, path: Path = REFERENCE_PLANS) -> dict[str, Any]:
    plans = json.loads(path.read_text())
    if dry_run:
        for name in CONFIGURATIONS:
            plans["configurations"][name] = tiny_configuration(plans["configurations"][name])
    return plans


# ------------------------------------------------------------------------------- running
class SectionTimeout(Exception):
    """A section ran past its budget."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``SectionTimeout`` in the main thread after ``seconds`` (SIGALRM; Python code only)."""

    def expire(_signum: int, _frame: Any) -> None:
        raise SectionTimeout(f"ran past its budget of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


Section = Callable[[Context], list[Row]]


def run_section(name: str, section: Section, ctx: Context) -> list[Row]:
    """The section's rows, or one row with its error: a failure never stops the check."""
    budget = ctx.profile.budgets[name]
    ctx.deadline = time.monotonic() + budget
    start = time.perf_counter()
    try:
        with time_limit(budget):
            rows = section(ctx)
    except Exception as error:  # noqa: BLE001 - every failure becomes a row
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        rows = [Row(name, "section failed", None, "", f"error: {detail[-300:]}")]
    finally:
        release_device_memory()
    print(f"[{name}] {time.perf_counter() - start:.1f} s", flush=True)
    return rows


def release_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------- output
def format_value(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0 or 0.001 <= abs(value) < 100000:
        return f"{value:.4g}"
    return f"{value:.3e}"


def format_table(rows: list[Row]) -> str:
    """Aligned text: one line per row, columns section, what, value, unit, note."""
    header = ("section", "what", "value", "unit", "note")
    cells = [header] + [(r.section, r.what, format_value(r.value), r.unit, r.note) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(4)]
    lines = []
    for cell in cells:
        line = "  ".join(c.ljust(w) for c, w in zip(cell[:4], widths, strict=True))
        lines.append(f"{line}  {cell[4]}".rstrip())
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def write_json(path: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    """Written aside and renamed, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=1))
    tmp.replace(path)


def default_out() -> Path:
    """``$OUT/gpu_check.json`` where the device tool collects files, else the cwd."""
    folder = os.environ.get("OUT")
    return Path(folder or ".") / "gpu_check.json"


def environment(profile: Profile) -> dict[str, Any]:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "dry_run": profile.dry_run,
        "device": profile.device,
        "gpu": gpu,
        "torch": torch.__version__,
        "cpus": cpu_count(),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU and tiny sizes (for CI)")
    parser.add_argument("--out", type=Path, default=None, help="JSON table (default: see doc)")
    parser.add_argument("--peer", type=Path, help="a venv with upstream nnunetv2 (else this one)")
    parser.add_argument("--only", nargs="+", help="run these sections only")
    args = parser.parse_args(argv)

    import tempfile

    import torch

    from benchmarks.gpu.sections import SECTIONS
    from benchmarks.gpu.upstream import peer_python

    os.environ.setdefault("nnUNet_compile", "false")  # compile is measured in its own section
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: use --dry-run on a machine without a GPU", file=sys.stderr)
        return 2
    profile = make_profile(args.dry_run, "cpu" if args.dry_run else "cuda")
    if profile.threads:
        torch.set_num_threads(profile.threads)
    out = args.out or default_out()
    meta = environment(profile)
    print(json.dumps(meta), flush=True)
    rows: list[Row] = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        ctx = Context(profile, load_plans(args.dry_run), Path(tmp), peer_python(args.peer))
        for name, section in SECTIONS.items():
            if args.only and name not in args.only:
                continue
            rows += run_section(name, section, ctx)
            write_json(out, rows, {**meta, "total_s": time.perf_counter() - start})
    print(TABLE_START)
    print(format_table(rows))
    print(TABLE_END)
    print(f"total {time.perf_counter() - start:.1f} s; JSON: {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
