"""A run whose raw dataset is converted from a Medical Segmentation Decathlon task (config
``dataset.msd``) by its first job, ``convert_msd`` (``nnunet-core convert-msd``).

The task is read at parse time, so a missing folder, a folder that is no MSD task or a task whose
name differs from ``dataset.name`` is the run's one line before any job, not a failed job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nnunet_core.dataset.msd_conversion import read_msd_task
from nnunet_core.errors import ConfigurationError, DatasetError
from nnunet_core.layout.raw import DATASET_JSON, images_ts_dir


def msd_task_of(dataset: dict[str, Any]) -> str | None:
    """The MSD task folder the run converts, or None (the dataset is read from ``raw_root``)."""
    return dataset.get("msd")


def check_msd_task(dataset: dict[str, Any]) -> None:
    """``dataset.msd`` names a readable MSD task whose name is ``dataset.name`` (the converted
    folder is ``Dataset{id}_{task name}``); else one line naming the key and what is wrong."""
    if dataset.get("synthetic", {}).get("enabled"):
        msg = "config dataset: msd is set but synthetic.enabled is true; choose one"
        raise ConfigurationError(msg)
    try:
        task = read_msd_task(dataset["msd"])
    except DatasetError as exc:
        raise ConfigurationError(f"config dataset.msd: {exc}") from None
    if task.name != dataset["name"]:
        msg = (
            f"config dataset.msd: the task {task.folder.name} converts to a dataset named "
            f"{task.name!r}, but dataset.name is {dataset['name']!r}; make them the same"
        )
        raise ConfigurationError(msg)


def test_images_folder(dataset: dict[str, Any], raw_dir: Path) -> Path:
    """Where the run's test images are: the raw dataset once converted, the task's own
    ``imagesTs`` before (the conversion copies it)."""
    task = msd_task_of(dataset)
    if task is None or (raw_dir / DATASET_JSON).is_file():
        return images_ts_dir(raw_dir)
    return images_ts_dir(Path(task))
