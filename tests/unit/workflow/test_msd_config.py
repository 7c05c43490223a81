"""Config ``dataset.msd`` (issue 49 item 4), at the level of ``check_config``: a task the first
job could not convert into ``Dataset{id}_{name}`` is refused before any job, in one line naming
the key and what is wrong. The workflow run itself: tests/integration/test_workflow_msd.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.config import Execution, check_config
from tests.helpers.nifti_tasks import make_task


def _config(tmp_path: Path, msd: str, name: str = "Tiny", synthetic: bool = False) -> dict:
    return {
        "work_dir": str(tmp_path / "work"),
        "dataset": {"id": 512, "name": name, "msd": msd, "synthetic": {"enabled": synthetic}},
        "planning": {"configurations": None, "overrides": {}},
        "training": {"trainer": "nnUNetTrainer", "folds": [0, 1, 2, 3, 4], "nodes": 1},
        "splits": {"num_folds": 5},
    }


def _refusal(config: dict) -> str:
    with pytest.raises(ConfigurationError) as caught:
        check_config(config, Execution())
    return str(caught.value)


def test_an_msd_task_whose_name_is_the_datasets_passes(tmp_path: Path) -> None:
    task = make_task(tmp_path, "Task05_Tiny", 1)
    check_config(_config(tmp_path, str(task)), Execution())


def test_a_missing_task_folder_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "Task05_Tiny"
    assert _refusal(_config(tmp_path, str(missing))) == (
        f"config dataset.msd: {missing}: no such folder (expected an MSD task TaskXX_Name)"
    )


def test_a_folder_that_is_no_msd_task_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "Dataset005_Tiny"
    folder.mkdir()
    assert _refusal(_config(tmp_path, str(folder))) == (
        f"config dataset.msd: {folder}: not an MSD task folder (its name must be TaskXX_Name, "
        "e.g. Task05_Prostate)"
    )


def test_a_task_named_otherwise_than_the_dataset_is_refused(tmp_path: Path) -> None:
    task = make_task(tmp_path, "Task05_Tiny", 1)
    assert _refusal(_config(tmp_path, str(task), name="Prostate")) == (
        "config dataset.msd: the task Task05_Tiny converts to a dataset named 'Tiny', but "
        "dataset.name is 'Prostate'; make them the same"
    )


def test_msd_with_synthetic_data_is_refused(tmp_path: Path) -> None:
    task = make_task(tmp_path, "Task05_Tiny", 1)
    assert _refusal(_config(tmp_path, str(task), synthetic=True)) == (
        "config dataset: msd is set but synthetic.enabled is true; choose one"
    )
