"""The command reference lists every ``nnunet-core`` command, each sub-command, and every flag its
parser accepts (the hidden ones excepted)."""

from __future__ import annotations

import argparse
import re

from nnunet_core.cli import COMMANDS, command_parser
from nnunet_core.reference.cli_flags import cli_reference

PAGE = cli_reference()


def sections() -> dict[str, str]:
    parts = re.split(r"^## `(nnunet-core [^`]+)`$", PAGE, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_command_has_its_section_with_every_visible_flag() -> None:
    by_prog = sections()
    assert [p for p in by_prog if p.count(" ") == 1] == [f"nnunet-core {n}" for n in COMMANDS]
    assert {"nnunet-core reproduce pack", "nnunet-core reproduce check"} <= set(by_prog)
    checked = 0
    for name in COMMANDS:
        for action in command_parser(name)._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                continue
            shown = action.option_strings or [action.dest.upper()]
            assert all(f"`{flag}`" in by_prog[f"nnunet-core {name}"] for flag in shown), (
                name,
                shown,
            )
            checked += 1
    assert checked > 200


def test_a_flag_row_has_its_default_and_help() -> None:
    train = sections()["nnunet-core train"]
    assert "| `--save-every` |  | epochs between checkpoint_latest writes (default 10) |" in train
    assert "| `-tr` | `nnUNetTrainer` | trainer:" in train
    assert "| `DATASET` | (required) |" in train
