"""Shared fixtures: tiny synthetic raw datasets made by the real generator.

``make_raw_dataset(target, **options)`` writes a dataset into the folder ``target`` (created, may
be missing or empty) and returns ``target``. ``options`` are ``SynthOptions`` fields
(``num_training``, ``num_test``, ``shape``, ``spacing``, ``channels``, ``two_d``, ``seed``,
``file_ending``, ``name``); the defaults below are tiny so tests stay fast. Each distinct set of
options is generated once per session and copied, so a test may break its copy freely.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.dataset.synthesize import SynthOptions, dataset_name_part, synthesize_dataset

TINY_OPTIONS: dict[str, Any] = {
    "num_training": 5,
    "num_test": 2,
    "shape": (12, 24, 24),
    "spacing": (2.5, 0.8, 0.8),
}

MakeRawDataset = Callable[..., Path]


@pytest.fixture(scope="session")
def make_raw_dataset(tmp_path_factory: pytest.TempPathFactory) -> MakeRawDataset:
    """Factory: ``make_raw_dataset(tmp_path / "raw" / "Dataset900_Synth", num_training=6)``."""
    cache_root = tmp_path_factory.mktemp("raw_dataset_cache")
    cache: dict[SynthOptions, Path] = {}

    def make(target: str | Path, **options: Any) -> Path:
        target = Path(target)
        merged = {**TINY_OPTIONS, "name": dataset_name_part(target), **options}
        for key in ("shape", "spacing"):
            merged[key] = tuple(merged[key])
        synth = SynthOptions(**merged)
        if synth not in cache:
            folder = cache_root / f"dataset_{len(cache)}"
            synthesize_dataset(folder, synth)
            cache[synth] = folder
        shutil.copytree(cache[synth], target, dirs_exist_ok=True)
        return target

    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``, ``--dist loadgroup``) each test file runs on one worker
    in its order (module fixtures are built once, and some tests read what an earlier test of
    their file left), and all SLURM tests run on the same worker: there is one test cluster."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    cluster_tests = Path(__file__).parent / "cluster"
    for item in items:
        in_cluster = cluster_tests in item.path.parents
        group = "slurm-test-cluster" if in_cluster else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
