"""Fixtures shared by the integration test modules (conftest modules are not imported by name:
their plain helpers live in tests/training_helpers.py and tests/workflow_helpers.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from filelock import FileLock
from training_helpers import DATASET, prepare_tiny_training, roots_env


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the workers' common parent), or this
    session's own temporary folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def tiny_training_template(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> Path:
    """The roots of the tiny ``3d_tiny`` dataset, built once per test run (the first worker to
    ask builds it under a file lock, the others wait and reuse it): six training modules each
    paid ~15 s of interpreter start-ups for the same five commands. Read-only: copy it."""
    shared = shared_folder(tmp_path_factory)
    template = shared / "tiny_training"
    with FileLock(str(shared / "tiny_training.lock")):
        if not template.is_dir():
            partial = shared / "tiny_training.partial"
            shutil.rmtree(partial, ignore_errors=True)
            prepare_tiny_training(partial, make_raw_dataset)
            partial.rename(template)  # complete or absent, never half built
    return template


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, tiny_training_template: Path) -> dict[str, str]:
    """Roots of a tiny preprocessed dataset with the ``3d_tiny`` configuration, a fresh copy per
    module (each training module breaks its own results freely). The copy is verified again with
    the real command: ``verify.json`` vouches for one raw folder, the template's."""
    from nnunet_core import cli

    root = tmp_path_factory.mktemp("training")
    shutil.copytree(tiny_training_template, root, dirs_exist_ok=True)
    environment = roots_env(root)
    roots = [
        "--raw",
        environment["nnUNet_raw"],
        "--preprocessed",
        environment["nnUNet_preprocessed"],
    ]
    assert cli.main(["verify", "-d", DATASET, "-np", "1", *roots]) == 0, root
    return environment
