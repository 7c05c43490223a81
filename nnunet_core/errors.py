"""Exceptions that the command line turns into one-line messages and exit codes."""

from __future__ import annotations


class NnunetCoreError(Exception):
    """Base class: an error the user can act on; the CLI prints it as one line."""

    exit_code = 1


class DatasetError(NnunetCoreError):
    """The raw dataset is broken (names the case and the problem)."""

    exit_code = 2


class ConfigurationError(NnunetCoreError):
    """A plans file, a configuration name or an option is wrong."""

    exit_code = 2
