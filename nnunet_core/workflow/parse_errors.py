"""A user's error found while the Snakefile is parsed is its own line(s) on the console.

Snakemake prints an exception raised while it parses a Snakefile with a header naming the file
and line (``ConfigurationError in file ".../common.smk", line 26:``) and the frames that led to
it: noise around a message that already names the config key and the value. Its command line
catches ``Exception`` only, so a ``SystemExit`` is the one way out that it leaves alone (the
workflow's input functions use it too, ``workflow.inputs.chosen_configurations``): the message
goes to stderr as it is, and the process ends with the error's own exit status (2 for a
configuration or dataset error, 3 for a user's code: ``nnunet_core.cluster.exit_codes``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from nnunet_core.errors import NnunetCoreError


@contextmanager
def one_line_errors(stream: TextIO | None = None) -> Iterator[None]:
    """Within: an ``NnunetCoreError`` is printed as its message alone and ends the process
    (``SystemExit`` with its ``exit_code``); any other exception passes unchanged (a bug keeps
    its traceback)."""
    try:
        yield
    except NnunetCoreError as exc:
        out = sys.stderr if stream is None else stream
        try:
            print(str(exc), file=out, flush=True)
        except OSError:  # stderr on a disk that just filled up: the exit status still says it
            pass
        raise SystemExit(exc.exit_code) from None
