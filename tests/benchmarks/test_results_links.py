"""benchmarks/results/README.md stays the index of the records: every relative link in it resolves,
every record outside archive/ is linked from a table row's record column, and every archived
record is linked too (so nothing is kept that no reader can reach)."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
README = RESULTS / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]


def record_cells(text: str) -> list[str]:
    """The last cell of each table row (the record column), header and rule rows left out."""
    lines = text.splitlines()
    rows = [
        line.rstrip()
        for line, after in zip(lines, [*lines[1:], ""], strict=True)
        if line.startswith("| ") and not after.startswith("|---")
    ]
    return [row.removesuffix("|").rsplit(" | ", 1)[-1].strip() for row in rows]


def records(archived: bool) -> set[str]:
    """Paths of the record files, relative to results/, in or outside archive/."""
    found = set()
    for path in RESULTS.rglob("*"):
        relative = path.relative_to(RESULTS).as_posix()
        if path.is_file() and path.name != "README.md":
            if relative.startswith("archive/") == archived:
                found.add(relative)
    return found


def test_every_relative_link_resolves() -> None:
    links = relative_links(README.read_text())
    assert links, "benchmarks/results/README.md: no relative link found (the pattern is stale)"
    broken = [t for t in links if not (RESULTS / t.split("#")[0]).exists()]
    assert not broken, f"benchmarks/results/README.md links to missing paths: {broken}"


def test_every_live_record_is_linked_from_a_record_cell() -> None:
    linked = {t for cell in record_cells(README.read_text()) for t in relative_links(cell)}
    live = records(archived=False)
    assert live, "benchmarks/results/: no record found outside archive/"
    unlinked = sorted(live - linked)
    assert not unlinked, f"records no row's record column links (link or archive them): {unlinked}"


def test_every_archived_record_is_linked() -> None:
    linked = set(relative_links(README.read_text()))
    unlinked = sorted(records(archived=True) - linked)
    assert not unlinked, f"archived records README.md does not link: {unlinked}"


def test_the_helpers_find_what_they_look_for() -> None:
    text = "| a | record |\n|---|---|\n| x | [r](speed/r.json), [s](https://e.org) |\n"
    assert record_cells(text) == ["[r](speed/r.json), [s](https://e.org)"]
    assert relative_links(record_cells(text)[0]) == ["speed/r.json"]
