"""Write the results report of a dataset: figures, per-class and summary tables, report.md.

Needs ``results/D/inference_information.json`` (``nnunet-core find-best-config``); training
curves, run times, ensembles and test Dice are included where their files exist, and so are
qualitative examples (the best, median and worst test case, else cross-validation case, drawn
from the raw images of ``--raw``/``nnUNet_raw``). For a paper it
also writes the results table (``results_table.csv`` and booktabs ``.tex``: mean, bootstrap
interval, Wilcoxon against the selected model; HD95 and NSD where the summaries have them), the
methods paragraph (``methods.md``) and every figure as PDF and SVG beside the PNG. Writes to
``results/D/report/`` unless ``-o`` says otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.common import add_dataset_flag, add_root_flags, dataset_from_args
from nnunet_core.layout.roots import results_dataset_dir


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_dataset_flag(parser)
    add_root_flags(parser)
    parser.add_argument(
        "--test-summary",
        help="summary.json of the final test predictions (from `nnunet-core evaluate`); "
        "leave out when there are no test labels",
    )
    parser.add_argument(
        "--test-set-note",
        help="why there is no test summary, for the report's notes (the workflow passes e.g. "
        "'no test images: test prediction and evaluation skipped')",
    )
    parser.add_argument(
        "--snakemake-logs",
        help="folder with Snakemake run logs (*.snakemake.log, e.g. .snakemake/log) for the run "
        "times of jobs other than training",
    )
    parser.add_argument(
        "--snakemake-records",
        help="Snakemake's job records (.snakemake/metadata of the workflow's folder): the run "
        "time of every job whose log lies in a --job-logs folder",
    )
    parser.add_argument(
        "--job-logs", nargs="+", default=[], help="the run's log folders (with --snakemake-records)"
    )
    parser.add_argument("-o", "--output", help="report folder (default: RESULTS/D/report)")
    parser.add_argument(
        "--seed", type=int, default=0, help="the training seed, as the results table names it"
    )
    parser.add_argument(
        "--no-print-figures",
        dest="print_figures",
        action="store_false",
        help="PNG figures only, without each one's PDF and SVG for print (most of the time)",
    )


def run(args: argparse.Namespace) -> int:
    from nnunet_core.report import build_report

    roots, name = dataset_from_args(args)
    written = build_report(
        results_dataset_dir(roots, name),
        args.output,
        args.test_summary,
        args.snakemake_logs,
        seed=args.seed,
        test_set_note=args.test_set_note,
        job_records=(
            (Path(args.snakemake_records), [Path(d) for d in args.job_logs])
            if args.snakemake_records
            else None
        ),
        print_figures=args.print_figures,
        raw_dataset_dir=roots.raw / name if roots.raw is not None else None,
    )
    for path in written:
        print(f"wrote {path}")
    return 0
