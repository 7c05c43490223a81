"""The methods of a paper against its baseline: ``methods_comparison.csv`` and ``.tex`` and a
figure per dataset (``nnunet_core.report.methods_output``).

    nnunet-core methods-table --baseline nnunet \\
        --run nnunet work/results/nnunet/seed_0/Dataset004_Hippocampus 0 [TEST_SUMMARY] \\
        --run nomirror work/results/nomirror/seed_0/Dataset004_Hippocampus 0 ... -o paper/

Each ``--run`` is one dataset trained with one seed by one method: the method's name, its
results folder, the seed and optionally its test-set summary. Also writes each dataset's
``methods.md``, describing every method from its own records. The same runs give the same
tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nnunet_core.commands.paper_table import parse_run
from nnunet_core.errors import ConfigurationError


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run",
        nargs="+",
        action="append",
        required=True,
        metavar="METHOD RESULTS_DIR SEED [TEST_SUMMARY]",
        help="one method, dataset and seed: the method, results/DatasetXXX_Name, the seed, "
        "its test summary.json",
    )
    parser.add_argument(
        "--baseline", required=True, help="the method the others are tested against"
    )
    parser.add_argument("-o", "--output", required=True, help="folder for the tables and figures")
    parser.add_argument(
        "--bootstrap-seed", type=int, default=0, help="seed of the bootstrap resampling (0)"
    )


def run(args: argparse.Namespace) -> int:
    from nnunet_core.report.methods_comparison import MethodRun
    from nnunet_core.report.methods_output import write_methods_comparison

    runs = []
    for values in args.run:
        if len(values) < 3:
            msg = f"--run {' '.join(values)}: expected METHOD RESULTS_DIR SEED [TEST_SUMMARY]"
            raise ConfigurationError(msg)
        runs.append(MethodRun(values[0], parse_run(values[1:])))
    seen = [(r.method, r.run.dataset, r.run.seed) for r in runs]
    twice = sorted({key for key in seen if seen.count(key) > 1})
    if twice:
        method, dataset, seed = twice[0]
        msg = f"--run: method {method} on dataset {dataset} with seed {seed} given twice"
        raise ConfigurationError(msg)
    if args.baseline not in {r.method for r in runs}:
        msg = f"--baseline {args.baseline}: no --run of that method"
        raise ConfigurationError(msg)
    written = write_methods_comparison(runs, args.baseline, Path(args.output), args.bootstrap_seed)
    for path in written:
        print(f"wrote {path}")
    return 0
