"""What a live run prints per job: one line, ``Job N: RULE [WILDCARDS], log: LOG``.

Snakemake prints a block per job (every input file, the reason, resources; a 2,000-character line
for a dataset of 16 cases) unless the rule has a ``message``, which replaces the block. Dry runs
keep the block (a preview is for reading what would run, and ``-p`` adds the commands). The
same line goes to ``.snakemake/log/*.snakemake.log``, which ``report.runtimes`` parses.
"""

from __future__ import annotations

import logging

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


CONSOLE_HANDLER = "DefaultStreamHandler"


def calm_console(logger: logging.Logger) -> int:
    """Leave each job's shell command and reason out of a live run's console, not out of its log.

    The profile's ``printshellcmds`` is right for dry runs (a preview shows the commands and why
    each job runs) and for ``.snakemake/log`` (a step can be rerun by hand), but a live console
    would print a command of several hundred characters and a reason naming every missing output
    under each job's one line. Snakemake has no setting for the console alone, so its console
    handler is told: its filter's ``printshellcmds`` and its formatter's ``quiet``. Returns how
    many it changed (0 where a logger plugin owns the console).
    """
    from snakemake.settings.enums import Quietness

    changed = 0
    for handler in logger.handlers:
        if handler.name != CONSOLE_HANDLER:
            continue
        for log_filter in handler.filters:
            if getattr(log_filter, "printshellcmds", None) is True:
                log_filter.printshellcmds = False
                changed += 1
        quiet = getattr(handler.formatter, "quiet", None)
        if quiet is not None and Quietness.REASON not in quiet:
            handler.formatter.quiet = {*quiet, Quietness.REASON}
            changed += 1
    return changed
