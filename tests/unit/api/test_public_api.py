"""The public API: what a user imports from ``nnunet_core`` itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nnunet_core
from nnunet_core.training.trainer import Trainer


def test_trainer_is_importable_from_the_package_root() -> None:
    from nnunet_core import Trainer as PublicTrainer

    assert PublicTrainer is Trainer
    assert "Trainer" in nnunet_core.__all__


def test_importing_the_package_does_not_import_torch() -> None:
    """Light commands (verify, fingerprint's help) start without torch's seconds of import."""
    code = "import sys, nnunet_core; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        nnunet_core.NoSuchThing  # noqa: B018
