"""The docs site's tools: a test that needs mkdocs skips without them (``make install-docs``),
and fails instead under NNUNET_REQUIRE_DOCS=1 (CI, whose .ci/run installs them)."""

from __future__ import annotations

import importlib.util
import os

import pytest

REASON = "the docs tools are not installed: make install-docs (pip install -e '.[docs]')"


def docs_tools_installed() -> bool:
    return all(importlib.util.find_spec(name) for name in ("mkdocs", "material"))


def require_docs_tools() -> None:
    """Skip (or fail under NNUNET_REQUIRE_DOCS=1) where mkdocs or mkdocs-material is missing."""
    if docs_tools_installed():
        return
    if os.environ.get("NNUNET_REQUIRE_DOCS") == "1":
        pytest.fail(f"NNUNET_REQUIRE_DOCS=1, but {REASON}")
    pytest.skip(REASON)
