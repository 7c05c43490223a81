"""Where the repository and the stored test data are, so that a test file names them the same
way whatever folder depth it sits at (no ``Path(__file__).parents[n]`` to recount on a move)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEST_DATA = REPO / "tests" / "data"
