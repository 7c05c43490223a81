#!/usr/bin/env python
"""Fault campaign over the whole workflow: SIGKILL at many moments, rerun, compare with a clean run.

    python benchmarks/fault_campaign.py --moments 16 --seed 1 --budget-minutes 25 \
        --json fault_campaign.json

The harness is tests/fault_campaign.py (its docstring says what is killed, how the rerun goes and
what counts as identical). One uninterrupted reference run, then per moment a fresh run killed at
that moment (SIGKILL to Snakemake's whole process group), the same command again (after the
``--unlock`` that Snakemake's lock message asks for), and the checks. The moments are stratified
over the stages, so the first k moments hit k different stages; ``--budget-minutes`` stops
starting new moments when the next one would not finish in time. ``--chain`` kills one run at
every moment in turn instead (cheaper, less independent; the test suite's mode).

The workflow runs from a snapshot of the code (``--source head``, the default: ``git archive
HEAD``; ``worktree``: the working tree's files as they are now; ``live``: the checkout itself), so
that edits made in the checkout during a long campaign cannot change the outputs half-way.
Prints a table (moment, stage, rerun ok, outputs identical) and the totals; ``--json`` writes both.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _harness():
    """tests/fault_campaign.py, imported under another name (this script has its name)."""
    spec = importlib.util.spec_from_file_location(
        "fault_campaign_harness", REPO / "tests" / "fault_campaign.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _harness()


def snapshot(source: str, target: Path) -> Path:
    """The code the workflow runs: a copy of HEAD or of the working tree, or the checkout."""
    if source == "live":
        return REPO
    target.mkdir(parents=True)
    if source == "head":
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", "HEAD"],
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(target, filter="data")
        return target
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if path.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(path.read_bytes())
    return target


def code_env(code: Path) -> dict[str, str]:
    """The environment in which `nnunet-core` (and Snakemake's Python) import ``code``'s package
    (PYTHONPATH comes before the editable install's finder)."""
    env = dict(os.environ)
    if code != REPO:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    where = subprocess.run(
        [sys.executable, "-c", "import nnunet_core; print(nnunet_core.__file__)"],
        env=env,
        cwd=tempfile.gettempdir(),  # as the jobs: not from this checkout's folder
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(code.resolve()):
        raise SystemExit(f"nnunet_core is imported from {where}, not from {code}")
    return env


def print_table(results: list[harness.MomentResult]) -> None:
    header = ("moment", "stage (target)", "stage hit", "rerun ok", "--unlock", "clean", "identical")
    rows = [
        (
            str(r.moment.index),
            f"{r.moment.stage} ({Path(r.moment.what).stem} +{r.moment.offset:.2f} s)",
            r.row()["stage hit"],
            "yes" if r.rerun_ok else f"NO ({r.rerun_returncode})",
            "yes" if r.unlocked else "no",
            "yes" if not r.half_written else f"NO ({len(r.half_written)})",
            "yes" if r.identical else f"NO ({len(r.differences)})",
        )
        for r in results
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    for r in results:
        for line in [*r.half_written, *r.differences, *r.escaped]:
            print(f"  moment {r.moment.index}: {line}")
        for path in r.stale_markers:
            print(f"  moment {r.moment.index}: (Snakemake still marks {path} incomplete)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moments", type=int, default=16, help="moments to draw (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="start no moment that would end after this many minutes (default: no limit)",
    )
    parser.add_argument(
        "--stages", nargs="+", default=None, help="draw only from these stages (default: all)"
    )
    parser.add_argument("--chain", action="store_true", help="chained moments (see above)")
    parser.add_argument("--source", choices=("head", "worktree", "live"), default="head")
    parser.add_argument("--base", type=Path, default=None, help="work folder (default: a temp)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    base = args.base or Path(tempfile.mkdtemp(prefix="fault_campaign_"))
    base.mkdir(parents=True, exist_ok=True)
    code = snapshot(args.source, base / "code")
    campaign = harness.Campaign(base, repo=code, env=code_env(code))
    print(f"code: {code} ({args.source}); runs in {campaign.rundir}", flush=True)
    reference = campaign.run_reference()
    moments = harness.draw_moments(reference.windows, args.moments, args.seed, args.stages)
    results: list[harness.MomentResult] = []
    if args.chain:
        results = campaign.run_chain(moments)
    else:
        for moment in moments:
            if args.budget_minutes is not None and results:
                spent = time.monotonic() - started
                mean = sum(r.seconds for r in results) / len(results)
                if spent + mean > args.budget_minutes * 60:
                    print(f"budget: {len(moments) - len(results)} moments not started")
                    break
            results.append(campaign.run_moment(moment))
    print()
    print_table(results)
    summary = harness.totals(results)
    print()
    for key, value in summary.items():
        print(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    print(f"wall time: {(time.monotonic() - started) / 60:.1f} min")
    if args.json:
        record = harness.report_json(reference, results, args.seed)
        record["source"] = args.source
        record["chain"] = args.chain
        record["stages_drawn_from"] = args.stages
        record["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
        args.json.write_text(json.dumps(record, indent=1, default=str) + "\n")
        print(f"written: {args.json}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
