"""The docs site builds with no warning (a broken link, anchor or page fails mkdocs' strict
build), README.md stays a front door that sends readers to it, and what the docs and the
examples show a user's trainer importing is the public API (issue 48)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nnunet_core
from tests.helpers.docs_site import require_docs_tools
from tests.helpers.paths import REPO

README_MAX_LINES = 120


def test_the_site_builds_strictly_with_both_generated_references(tmp_path: Path) -> None:
    require_docs_tools()
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    config_page = (site / "reference" / "config" / "index.html").read_text()
    assert "training.pretrained_weights.fold" in config_page
    assert "nnunet-core reproduce unpack" in (site / "reference" / "cli" / "index.html").read_text()
    # a record the conclusions link to is carried into the site at its repository path
    assert (site / "benchmarks" / "results" / "speed" / "pipeline.json").is_file()


def test_the_readme_is_a_front_door_of_at_most_120_lines() -> None:
    text = (REPO / "README.md").read_text()
    assert text.count("\n") <= README_MAX_LINES
    # it sends readers to every page of the site
    pages = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))
    missing = [p for p in pages if p != "docs/index.md" and f"({p}" not in text]
    assert missing == []


def test_the_examples_and_the_docs_import_only_the_public_api() -> None:
    """A user's trainer copies what they show: ``from nnunet_core import <public name>`` only."""
    sources = [*(REPO / "examples").rglob("*.py"), *(REPO / "docs").rglob("*.md")]
    imports = [
        (path.name, line.strip())
        for path in sources
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from|import) nnunet_core\b", line)
    ]
    assert len(imports) >= 4  # the examples and the docs' snippets
    for where, line in imports:
        match = re.fullmatch(r"from nnunet_core import ([\w, ]+)", line)
        assert match, f"{where}: {line} (a submodule is not public)"
        names = {name.strip() for name in match.group(1).split(",")}
        assert names <= set(nnunet_core.__all__), f"{where}: {line}"
