"""Shared fixtures: tiny synthetic raw datasets made by the real generator.

``make_raw_dataset(target, **options)`` writes a dataset into the folder ``target`` (created, may
be missing or empty) and returns ``target``. ``options`` are ``SynthOptions`` fields
(``num_training``, ``num_test``, ``shape``, ``spacing``, ``channels``, ``two_d``, ``seed``,
``file_ending``, ``name``); the defaults below are tiny so tests stay fast. Each distinct set of
options is generated once per session and copied, so a test may break its copy freely.

``env``: the roots of a tiny preprocessed dataset with the ``3d_tiny`` configuration, once per
module, for the training tests of tests/integration and tests/parity.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nnunet_core.dataset.synthesize import SynthOptions, dataset_name_part, synthesize_dataset
from tests.helpers.training import prepare_tiny_training

# TRANSITIONAL: tests/integration/test_fault_campaign.py and the benchmark tests of tests/unit,
# which another branch moves, import `fault_campaign` and `benchmark_modules` by bare name (as
# pytest's old import mode allowed). Appended, so nothing here shadows an installed module;
# delete these lines once those files import through `tests.` like the rest.
for _folder in ("", "unit"):
    _path = str(Path(__file__).resolve().parent / _folder)
    if _path not in sys.path:
        sys.path.append(_path)

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


MakePreprocessedDataset = Callable[..., Path]


@pytest.fixture(scope="session")
def make_preprocessed_dataset(make_raw_dataset: MakeRawDataset) -> MakePreprocessedDataset:
    """Factory: ``make_preprocessed_dataset(root, "Dataset902_X", "3d_fullres", num_training=4)``
    writes ``root/raw/<name>`` and preprocesses one configuration into ``root/pre/<name>`` with
    the real command line, in-process (three interpreter start-ups would cost seconds); returns
    the preprocessed dataset folder."""
    from nnunet_core import cli

    def make(root: Path, name: str, configuration: str, **options: Any) -> Path:
        make_raw_dataset(root / "raw" / name, **{"num_test": 0, **options})
        roots = ["-d", name, "--raw", str(root / "raw"), "--preprocessed", str(root / "pre")]
        steps = (["fingerprint", "-np", "1"], ["plan"],
                 ["preprocess", "-np", "1", "--no-pbar", "-c", configuration])  # fmt: skip
        for step in steps:
            assert cli.main([step[0], *roots, *step[1:]]) == 0, step
        return root / "pre" / name

    return make


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> dict[str, str]:
    """Roots of a tiny preprocessed dataset with the ``3d_tiny`` configuration, built once per
    module (each training module breaks its own results freely)."""
    return prepare_tiny_training(tmp_path_factory.mktemp("training"), make_raw_dataset)


# The files that take longest under `make test` (--durations, December 2026), longest first.
LONGEST_FILES = (
    "test_workflow_paper.py",
    "test_fault_campaign.py",
    "test_workflow_pipeline.py",
    "test_readme_commands.py",
    "test_workflow_cascade.py",
    "test_workflow_fine_tuning.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the other files with end-to-end tests (marker slow), each
    file's own order kept: ``make test`` hands whole files to its workers (``--dist loadfile``)
    in this order, so the long files start at once instead of ending the run on one worker while
    the others idle."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}

    def start_rank(item: pytest.Item) -> int:
        if item.path.name in LONGEST_FILES:
            return LONGEST_FILES.index(item.path.name)
        return len(LONGEST_FILES) + (item.path not in slow_files)

    items.sort(key=start_rank)
