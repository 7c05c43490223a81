"""Whether this Snakemake invocation runs jobs, read from its command line.

Snakemake reads the Snakefile before it says what it was asked to do, and the main process's
checks that act before any job (the dataset check writes the integrity report) must not run for
``--unlock`` (what a user runs after a killed run, dataset broken or not), ``--dag``, ``--lint``,
``--summary``, ``--report``, the ``--list-*`` questions or ``--touch``: those run no job. Only
long options are read: a short one could be a test runner's own (pytest's ``-n``, ``-v``), and a
dry run is known from Snakemake's settings.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

NO_JOB_OPTIONS = frozenset(
    {
        "--unlock", "--dag", "--d3dag", "--rulegraph", "--filegraph", "--summary",
        "--detailed-summary", "--lint", "--touch", "--report", "--archive",
        "--cleanup-metadata", "--cm", "--cleanup-shadow", "--delete-all-output",
        "--delete-temp-output", "--containerize", "--export-cwl", "--print-compilation",
        "--generate-unit-tests", "--conda-create-envs-only", "--conda-cleanup-envs",
        "--cleanup-containers", "--lt", "--lc", "--li", "--lp", "--lv",
    }
)  # fmt: skip


def runs_jobs(argv: Sequence[str] | None = None) -> bool:
    """False when the command line asks Snakemake for something that runs no job."""
    args = list(sys.argv[1:] if argv is None else argv)
    for arg in args:
        option = arg.split("=", 1)[0]
        if option in NO_JOB_OPTIONS or option.startswith("--list-"):
            return False
    return True
