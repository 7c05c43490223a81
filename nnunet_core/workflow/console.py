"""What a live run prints per job: one line, ``Job N: RULE [WILDCARDS], log: LOG``.

Snakemake prints a block per job (every input file, the reason, resources; a 2,000-character line
for a dataset of 16 cases) unless the rule has a ``message``, which replaces the block. Dry runs
keep the block (a preview is for reading what would run, and ``-p`` adds the commands). The
same line goes to ``.snakemake/log/*.snakemake.log``, which ``report.runtimes`` parses.
"""

from __future__ import annotations

_LOGGED = "{rule}, log: {log}"
_LOGGED_WITH_WILDCARDS = "{rule} {wildcards}, log: {log}"
_TARGET = "{rule}"


def job_message(dry_run: bool, *, wildcards: bool = False, log: bool = True) -> str | None:
    """A rule's ``message:`` (None in a dry run: Snakemake then prints its full block).

    ``wildcards``: the rule has wildcards (shown as ``configuration=2d,fold=0``); ``log``: it
    has a log file (target rules such as ``all`` have none)."""
    if dry_run:
        return None
    if not log:
        return _TARGET
    return _LOGGED_WITH_WILDCARDS if wildcards else _LOGGED
