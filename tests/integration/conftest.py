"""Fixtures shared by the integration test modules (conftest modules are not imported by name:
their plain helpers live in tests/training_helpers.py and tests/workflow_helpers.py)."""

from __future__ import annotations

import pytest
from training_helpers import prepare_tiny_training


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict[str, str]:
    """Roots of a tiny preprocessed dataset with the ``3d_tiny`` configuration, built once per
    module (each training module breaks its own results freely)."""
    return prepare_tiny_training(tmp_path_factory.mktemp("training"), make_raw_dataset)
