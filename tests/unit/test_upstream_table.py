"""docs/upstream.md's table "Upstream's entry points and ours": every console script of upstream
nnU-Net 2.8.1 has one row, and the row names our command (one that exists) or says plainly that
ours is not there yet and which issue covers it; no row sends the user back to upstream.

Upstream's list is the copy in tests/data/upstream_entry_points.txt (made from the peer venv's
entry points), so the test needs no upstream install."""

from __future__ import annotations

import re

from nnunet_core.cli import COMMANDS
from tests.helpers.paths import REPO

PAGE = REPO / "docs" / "upstream.md"
HEADING = "## Upstream's entry points and ours"
UPSTREAM = REPO / "tests" / "data" / "upstream_entry_points.txt"
NOT_THERE_YET = re.compile(r"not there yet\b.*\bissue \d+", re.IGNORECASE)


def upstream_scripts() -> list[str]:
    lines = UPSTREAM.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def table_rows() -> list[list[str]]:
    """The cells of each body row of the first table under the heading (``\\|`` is no border)."""
    text = PAGE.read_text(encoding="utf-8")
    assert HEADING in text, f"{PAGE} has no section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, "no table in the section"
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[2:]]


def test_the_copy_lists_upstreams_console_scripts() -> None:
    scripts = upstream_scripts()
    assert len(scripts) == 21 and len(set(scripts)) == len(scripts)
    assert all(re.fullmatch(r"nnUNetv2_\w+", s) for s in scripts), scripts
    assert {"nnUNetv2_train", "nnUNetv2_plot_overlay_pngs", "nnUNetv2_convert_MSD_dataset"} <= set(
        scripts
    )


def test_every_upstream_entry_point_has_one_row() -> None:
    named = [row[0].strip("`") for row in table_rows() if row[0].startswith("`nnUNetv2_")]
    assert sorted(named) == sorted(upstream_scripts())
    assert len(named) == len(set(named)), "an entry point has two rows"


def test_each_row_names_our_command_or_says_it_is_not_there_yet() -> None:
    for row in table_rows():
        upstream, ours = row[0], row[1]
        commands = re.findall(r"nnunet-core ([a-z][a-z-]*)", ours)
        aliases = re.findall(r"\(= `([a-z][a-z-]*)`\)", ours)
        if commands:
            unknown = [c for c in commands + aliases if c not in COMMANDS]
            assert not unknown, f"{upstream}: no such command {unknown}"
        elif upstream.startswith("`nnUNetv2_"):
            assert NOT_THERE_YET.search(" ".join(row[1:])), f"{upstream}: names no command"


def test_no_row_sends_the_user_to_upstream() -> None:
    for row in table_rows():
        text = " ".join(row).lower()
        assert "use upstream" not in text and "upstream's instead" not in text, row[0]
