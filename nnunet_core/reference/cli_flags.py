"""The command reference: every ``nnunet-core`` command's arguments and flags as markdown, read
from the same argparse parsers that ``nnunet-core COMMAND --help`` prints."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from nnunet_core.cli import COMMANDS, command_parser

INTRO = """\
# Command reference

Every `nnunet-core` command with its arguments and flags, written from the command's own parser
when the site is built (`nnunet-core COMMAND --help` prints the same). Flags that mirror
upstream's `nnUNetv2_*` keep upstream's spelling; where the two differ:
[Coming from upstream](../upstream.md).
"""


@dataclass(frozen=True)
class Flag:
    """One argument of a command: its spellings (none for a positional), metavar, default, help."""

    names: tuple[str, ...]
    dest: str
    default: object
    help: str
    required: bool


def command_flags(parser: argparse.ArgumentParser) -> Iterator[tuple[str, list[Flag]]]:
    """``(prog, flags)`` of ``parser`` and of each sub-command it has (``reproduce pack``)."""
    flags, children = [], []
    # argparse keeps a parser's arguments only in this attribute
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            children.extend(action.choices.values())
        elif action.help != argparse.SUPPRESS and not isinstance(action, argparse._HelpAction):
            flags.append(_flag(parser, action))
    yield parser.prog, flags
    for child in children:
        yield from command_flags(child)


def _flag(parser: argparse.ArgumentParser, action: argparse.Action) -> Flag:
    formatter = parser._get_formatter()
    text = formatter._expand_help(action) if action.help else ""
    return Flag(
        tuple(action.option_strings),
        action.dest,
        action.default,
        " ".join(text.split()),
        bool(action.required),
    )


def cli_reference() -> str:
    """The reference page: per command its one-line purpose, usage and a table of its flags."""
    parts = [INTRO]
    for name, (_, purpose) in COMMANDS.items():
        for prog, flags in command_flags(command_parser(name)):
            parts.append(_section(prog, purpose if prog.endswith(f" {name}") else "", flags))
    return "\n".join(parts)


def _section(prog: str, purpose: str, flags: list[Flag]) -> str:
    lines = [f"## `{prog}`", ""]
    if purpose:
        lines += [purpose[0].upper() + purpose[1:] + ".", ""]
    if not flags:
        return "\n".join(lines)
    lines += ["| argument | default | meaning |", "|---|---|---|"]
    for flag in flags:
        name = ", ".join(f"`{n}`" for n in flag.names) or f"`{flag.dest.upper()}`"
        # a help that names its default says it better than the value (some are this machine's)
        stated = "default" in flag.help.lower()
        default = "(required)" if flag.required else "" if stated else _default(flag.default)
        lines.append(f"| {name} | {default} | {_cell(flag.help)} |")
    return "\n".join([*lines, ""])


def _default(value: object) -> str:
    if value is None or value is False or value == "":
        return ""
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return f"`{value}`"


def _cell(text: str) -> str:
    """Help text as a table cell: literal, not markdown (a ``*`` or ``<`` is meant as typed)."""
    for char, escaped in (("|", "\\|"), ("*", "\\*"), ("<", "&lt;")):
        text = text.replace(char, escaped)
    return text
