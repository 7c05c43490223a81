"""The results table across datasets and seeds: one CSV and one booktabs LaTeX table for all, one
pair per dataset, and each dataset's methods paragraph.

    nnunet-core paper-table --run work_s0/results/Dataset004_Hippocampus 0 \\
        work_s0/predictions/Dataset004_Hippocampus/test_summary.json \\
        --run work_s1/results/Dataset004_Hippocampus 1 --run ... -o paper/

Each ``--run`` is one dataset trained with one seed: its results folder, the seed, and
optionally its test-set summary (``--no-methods-text``: no ``methods.md``, which a methods
comparison writes). Runs of the same dataset are pooled as seeds (mean and sd over
seeds, bootstrap intervals over cases, Wilcoxon against the selected model; see
``nnunet_core.report.paper_tables``). The same runs give the same bytes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from nnunet_core.errors import ConfigurationError

if TYPE_CHECKING:
    from nnunet_core.report.paper_data import Run


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run",
        nargs="+",
        action="append",
        required=True,
        metavar="RESULTS_DIR SEED [TEST_SUMMARY]",
        help="one dataset and seed: results/DatasetXXX_Name, the seed, its test summary.json",
    )
    parser.add_argument("-o", "--output", required=True, help="folder for the tables")
    parser.add_argument(
        "--bootstrap-seed", type=int, default=0, help="seed of the bootstrap resampling (0)"
    )
    parser.add_argument(
        "--no-methods-text",
        action="store_true",
        help="write no <dataset>/methods.md (with methods, `methods-table` writes the one that "
        "describes every method)",
    )


def parse_run(values: list[str]) -> Run:
    from nnunet_core.report.paper_data import Run

    if len(values) not in (2, 3):
        msg = f"--run {' '.join(values)}: expected RESULTS_DIR SEED [TEST_SUMMARY]"
        raise ConfigurationError(msg)
    results = Path(values[0])
    if not results.is_dir():
        msg = f"--run {values[0]}: results folder not found"
        raise ConfigurationError(msg)
    try:
        seed = int(values[1])
    except ValueError:
        msg = f"--run {' '.join(values)}: seed {values[1]!r} is not an integer"
        raise ConfigurationError(msg) from None
    summary = Path(values[2]) if len(values) == 3 else None
    if summary is not None and not summary.is_file():
        msg = f"--run {' '.join(values)}: test summary {summary} not found"
        raise ConfigurationError(msg)
    return Run(results.name, seed, results, summary)


def run(args: argparse.Namespace) -> int:
    from nnunet_core.report.paper_output import write_paper_tables

    runs = [parse_run(values) for values in args.run]
    seen = [(r.dataset, r.seed) for r in runs]
    duplicates = sorted({pair for pair in seen if seen.count(pair) > 1})
    if duplicates:
        msg = f"--run: dataset {duplicates[0][0]} with seed {duplicates[0][1]} given twice"
        raise ConfigurationError(msg)
    written = write_paper_tables(
        runs, Path(args.output), args.bootstrap_seed, methods_text=not args.no_methods_text
    )
    for path in written:
        print(f"wrote {path}")
    return 0
