"""The tracking tests skip where the back-end's package is missing, and fail instead under
NNUNET_REQUIRE_TRACKING=1 (CI, whose .ci/run installs the extras ``mlflow`` and ``wandb``)."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_tracking_package(name: str) -> None:
    """Skip (or fail under NNUNET_REQUIRE_TRACKING=1) where ``name`` (mlflow, wandb) is missing."""
    if importlib.util.find_spec(name) is not None:
        return
    reason = f"the {name} package is not installed (make install EXTRAS={name})"
    if os.environ.get("NNUNET_REQUIRE_TRACKING") == "1":
        pytest.fail(f"NNUNET_REQUIRE_TRACKING=1, but {reason}")
    pytest.skip(reason)
