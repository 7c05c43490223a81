#!/usr/bin/env python
"""Security probe campaign: hostile config values, paths, zips, model code, locks and malformed
files against the real commands.

    .venv/bin/python -m benchmarks.security.run --json security_campaign.json
    .venv/bin/python -m benchmarks.security.run --list
    .venv/bin/python -m benchmarks.security.run --only zip_dotdot_member work_dir_space

Each probe builds its hostile value or file in a fresh sandbox holding a decoy tree (README.md
here), runs the real command (``nnunet-core`` or ``snakemake`` on the repository's Snakefile),
and checks that no marker file appeared, that the decoy tree is unchanged and that the outcome is
the one the probe expects: a one-line refusal naming the offending value or file, or a correct
run. The shared files (a trained tiny demo fold, its predictions and zip) are made once first.
Prints a table (probe, kind, expected, outcome, seconds, result); ``--json`` writes the record and
the table beside it (``.txt``). Exit 0 only when every probe held.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.security.campaign import record, run_probe, table
from benchmarks.security.prepared import prepare
from benchmarks.security.probes import select
from benchmarks.security.scenario import REPO
from nnunet_core.io.atomic import write_text


def commit() -> str:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    status = ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]
    dirty = subprocess.run(status, capture_output=True, text=True, check=False)
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", default=None, help="run only these probes")
    parser.add_argument("--list", action="store_true", help="list the probes and exit")
    parser.add_argument("--base", type=Path, default=None, help="work folder (default: a temp)")
    parser.add_argument("--json", type=Path, default=None, help="write the record here (+ .txt)")
    args = parser.parse_args(argv)

    chosen = select(args.only)
    if args.list:
        for probe in chosen:
            print(f"{probe.name:34} {probe.kind:11} {probe.expect:8} {probe.what}")
        print(f"{len(chosen)} probes")
        return 0
    started = time.monotonic()
    base = (args.base or Path(tempfile.mkdtemp(prefix="security_campaign_"))).resolve()
    base.mkdir(parents=True, exist_ok=True)
    print(f"base: {base}; preparing the shared files ...", flush=True)
    prepared = prepare(base)
    print(f"prepared in {time.monotonic() - started:.0f} s", flush=True)
    results = []
    for probe in chosen:
        result = run_probe(probe, prepared, base)
        verdict = "ok" if result.ok else "FAIL: " + "; ".join(result.problems)[:300]
        print(f"{probe.name}: {result.outcome}, {result.seconds:.1f} s, {verdict}", flush=True)
        results.append(result)
    text = table(results)
    minutes = (time.monotonic() - started) / 60
    print()
    print(text, end="")
    print(f"wall time: {minutes:.1f} min")
    if args.json:
        data = record(
            results, commit=commit(), date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            command=" ".join(["python -m benchmarks.security.run", *(argv or sys.argv[1:])]),
            wall_minutes=round(minutes, 1), base=str(base),
        )  # fmt: skip
        write_text(args.json, json.dumps(data, indent=1, default=str) + "\n")
        write_text(args.json.with_suffix(".txt"), text + f"wall time: {minutes:.1f} min\n")
        print(f"written: {args.json} and {args.json.with_suffix('.txt')}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
