"""Pack a finished run for a reader, unpack it for a rerun, and check the rerun's tables.

    nnunet-core reproduce pack --config-json CONFIG.json --work WORK \
        --run RAW/D PLANS WORK/results/D [--run ...] [--paper [--methods]] -o OUT
    nnunet-core reproduce unpack reproduce.tar.gz --into rerun
    nnunet-core reproduce check reproduce.tar.gz rerun/work

The workflow's ``reproduce`` target runs ``pack`` (``snakemake reproduce``); what the archive
holds and what ``check`` compares is in ``nnunet_core.workflow.reproduce``. ``check`` exits 1 and
names
each file that differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def configure_parser(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    pack = actions.add_parser("pack", help="write the archive of a finished run")
    pack.add_argument(
        "--config-json", required=True, help="the run's config (JSON text or file, defaults in)"
    )
    pack.add_argument("--work", required=True, help="the run's work_dir")
    pack.add_argument(
        "--run",
        nargs=3,
        action="append",
        required=True,
        metavar=("RAW_DATASET", "PLANS", "RESULTS_DATASET"),
        help="one dataset and seed: raw/DatasetXXX_Name (checksums), the plans name and its "
        "results folder (results/[seed_<n>/]DatasetXXX_Name)",
    )
    pack.add_argument(
        "--paper", action="store_true", help="several datasets or seeds: also work/paper's tables"
    )
    pack.add_argument(
        "--methods", action="store_true", help="with methods: also work/paper's comparison"
    )
    pack.add_argument("--snakemake-command", default="", help="recorded in the manifest")
    pack.add_argument("-o", "--output", required=True, help="archive to write (.tar.gz)")
    unpack = actions.add_parser("unpack", help="write config.yaml for a rerun")
    unpack.add_argument("archive")
    unpack.add_argument("--into", required=True, help="folder of the rerun (work_dir inside)")
    unpack.add_argument(
        "--raw-root",
        help="where the reader keeps the raw dataset (the run's own raw_root if unset)",
    )
    unpack.add_argument(
        "--trust-model-code",
        action="store_true",
        help="write the user trainer files the archive carries (the rerun runs them; each is "
        "named with its sha256): without it an archive carrying code is refused",
    )
    check = actions.add_parser("check", help="compare a rerun with the archive, byte for byte")
    check.add_argument("archive")
    check.add_argument("work", help="the rerun's work_dir")


def run(args: argparse.Namespace) -> int:
    from nnunet_core.workflow import reproduce

    if args.action == "pack":
        return _pack(args)
    if args.action == "unpack":
        config = reproduce.unpack(
            Path(args.archive), Path(args.into), args.raw_root, trusted=args.trust_model_code
        )
        print(f"wrote {config}; run: snakemake --cores 2 --configfile {config}")
        return 0
    problems = reproduce.check(Path(args.archive), Path(args.work))
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 1
    print(f"{args.work}: every reproduced file is identical to {args.archive}'s")
    return 0


def _pack(args: argparse.Namespace) -> int:
    from nnunet_core.training.fold.provenance import git_commit, package_versions
    from nnunet_core.workflow import reproduce

    text = args.config_json
    config = json.loads(text if text.lstrip().startswith("{") else Path(text).read_text())
    manifest = {
        "versions": package_versions(),
        "git": git_commit(),
        "snakemake_command": args.snakemake_command,
    }
    runs = [
        reproduce.PackedRun(Path(raw), plans, Path(results)) for raw, plans, results in args.run
    ]
    output = reproduce.pack(
        config,
        Path(args.work),
        runs,
        manifest,
        Path(args.output),
        paper=args.paper,
        methods=args.methods,
    )
    print(f"wrote {output}")
    return 0
