#!/usr/bin/env python
"""Fault campaign over the whole workflow: SIGKILL at many moments, rerun, compare with a clean run.

    python -m benchmarks.faults.run --seed 1 --json fault_campaign.json

The harness is the rest of benchmarks/faults/ (README.md there says what is killed, how the rerun
goes and what counts as identical). One uninterrupted reference run, then per moment a fresh run
killed at that moment (SIGKILL to Snakemake's whole process group), the same command again (after
the ``--unlock`` that Snakemake's lock message asks for), and the checks.

Every stage is hit: ``--moments`` defaults to one per stage of the reference run (preprocess,
the ensembles and the report included), the moments are stratified over the stages (the first k
moments aim at k different stages), and a kill that came when no job of its stage ran (a short
job finished sooner than in the reference) is tried again at another point of that stage, up
to ``--retries`` times. The totals name any stage no kill hit. ``--budget-minutes`` stops
starting new moments when the next one would not finish in time (the stages not reached then
show in the totals). ``--chain`` kills one run at every moment in turn instead (cheaper, less
independent, no retries; the test suite's mode). ``--draw-only`` runs the reference and prints
the moments it would use.

The workflow runs from a snapshot of the code (``--source head``, the default: ``git archive
HEAD``; ``worktree``: the working tree's files as they are now; ``live``: the checkout itself), so
that edits made in the checkout during a long campaign cannot change the outputs half-way.
Prints a table (moment, stage, rerun ok, outputs identical) and the totals; ``--json`` writes both.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from benchmarks.faults.campaign import Campaign, MomentResult, report_json, stages_of, totals
from benchmarks.faults.scenario import REPO
from benchmarks.faults.stages import draw_chain, draw_moments, rules_not_run
from nnunet_core.io.atomic import write_text


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


def print_table(results: list[MomentResult]) -> None:
    header = (
        "moment", "stage (target)", "stage hit", "tries", "rerun ok", "--unlock", "clean",
        "identical",
    )  # fmt: skip
    rows = [
        (
            str(r.moment.index),
            f"{r.moment.stage} ({Path(r.moment.what).stem} +{r.moment.offset:.2f} s)",
            r.row()["stage hit"],
            str(r.attempts),
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
    parser.add_argument(
        "--moments", type=int, default=None, help="moments to draw (default: one per stage)"
    )
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
    parser.add_argument(
        "--retries", type=int, default=2, help="more tries of a moment that missed its stage"
    )
    parser.add_argument("--chain", action="store_true", help="chained moments (see above)")
    parser.add_argument("--draw-only", action="store_true", help="print the moments, kill none")
    parser.add_argument("--source", choices=("head", "worktree", "live"), default="head")
    parser.add_argument("--base", type=Path, default=None, help="work folder (default: a temp)")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    args = parser.parse_args(argv)

    started = time.monotonic()
    base = args.base or Path(tempfile.mkdtemp(prefix="fault_campaign_"))
    base.mkdir(parents=True, exist_ok=True)
    code = snapshot(args.source, base / "code")
    campaign = Campaign(base, repo=code, env=code_env(code))
    print(f"code: {code} ({args.source}); runs in {campaign.rundir}", flush=True)
    reference = campaign.run_reference()
    draw = draw_chain if args.chain else draw_moments  # a chain: training moments in one fold
    moments = draw(reference.windows, args.moments, args.seed, args.stages)
    aimed = [s for s in stages_of(reference.windows) if args.stages is None or s in args.stages]
    not_run = rules_not_run(reference.jobs)
    print(f"rules the reference did not run (no moment hits them): {', '.join(not_run) or 'none'}")
    if args.draw_only:
        for m in moments:
            print(f"moment {m.index}: {m.stage} ({m.what} +{m.offset:.2f} s, at {m.at:.1f} s)")
        missing = sorted(set(aimed) - {m.stage for m in moments})
        print(f"stages without a moment: {', '.join(missing) or 'none'}")
        return 0
    results: list[MomentResult] = []
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
            results.append(campaign.run_moment_in_stage(moment, args.seed, args.retries))
    print()
    print_table(results)
    summary = totals(results, aimed)
    print()
    for key, value in summary.items():
        print(f"{key}: {(', '.join(value) or 'none') if isinstance(value, list) else value}")
    print(f"wall time: {(time.monotonic() - started) / 60:.1f} min")
    if args.json:
        record = report_json(reference, results, args.seed, aimed)
        record["source"] = args.source
        record["chain"] = args.chain
        record["stages_drawn_from"] = args.stages
        record["retries"] = args.retries
        record["rules_not_run"] = not_run
        record["wall_minutes"] = round((time.monotonic() - started) / 60, 1)
        write_text(args.json, json.dumps(record, indent=1, default=str) + "\n")
        print(f"written: {args.json}")
    return 0 if all(r.ok for r in results) and not summary.get("stages not hit") else 1


if __name__ == "__main__":
    sys.exit(main())
