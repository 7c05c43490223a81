"""Shared fixtures: tiny synthetic raw datasets made by the real generator.

``make_raw_dataset(target, **options)`` writes a dataset into the folder ``target`` (created, may
be missing or empty) and returns ``target``. ``options`` are ``SynthOptions`` fields
(``num_training``, ``num_test``, ``shape``, ``spacing``, ``channels``, ``two_d``, ``seed``,
``file_ending``, ``name``); the defaults below are tiny so tests stay fast. Each distinct set of
options is generated once per session and copied, so a test may break its copy freely.

``env``: the roots of a tiny preprocessed dataset with the ``3d_tiny`` configuration, built once
per test run and copied per module, for the training tests of tests/integration and tests/parity.
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning: six test workers share two cores, and torch's
# spinning threads cost about three times the CPU there (the workflow's train and predict jobs
# get the same setting: workflow/rules/train.smk, predict.smk). Set before anything loads torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# No transparent huge pages for numpy's large arrays: on a VM whose kernel compacts memory for
# them on the first touch (THP "madvise", as CI's), each fresh 2 MB page cost more system time
# than the arithmetic on it (a tiny fingerprint's 1e8 samples, 2 workers: 4.4 CPU s with them,
# 3.7 without).
# Only the memory's page size changes, never a result. Set before anything loads numpy.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from filelock import FileLock

from nnunet_core.dataset.synthesize import SynthOptions, dataset_name_part, synthesize_dataset
from tests.helpers.training import DATASET, prepare_tiny_training, roots_env, train_shared_fold
from tests.helpers.workflow import prepared_config, snakemake

pytest_plugins = ["tests.helpers.cpu_log"]

# A test worker's own torch work runs in one thread: six workers share two cores, where a second
# intra-op thread only adds waiting and hand-overs (about 6 % more CPU for the same unit tests).
# The processes the tests start choose their own threads, as users' processes do.
torch.set_num_threads(1)

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


def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every pytest-xdist worker of this run sees (the workers' common parent), or this
    session's own temporary folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """``shared_folder()/name``, made by ``build(folder)`` once per test run: the first worker to
    ask builds it under a file lock, the others wait and reuse it; complete or absent, never half
    built. Read-only for its users: they copy it."""
    shared = shared_folder(tmp_path_factory)
    template = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not template.is_dir():
            partial = shared / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            build(partial)
            partial.rename(template)
    return template


@pytest.fixture(scope="session")
def tiny_training_template(tmp_path_factory: pytest.TempPathFactory, make_raw_dataset) -> Path:
    """The roots of the tiny ``3d_tiny`` dataset, built once per test run (``built_once``): six
    training modules each paid ~15 s of interpreter start-ups for the same five commands."""
    return built_once(
        tmp_path_factory,
        "tiny_training",
        lambda folder: prepare_tiny_training(folder, make_raw_dataset),
    )


@pytest.fixture(scope="session")
def trained_tiny_fold(
    tmp_path_factory: pytest.TempPathFactory, tiny_training_template: Path
) -> Path:
    """The tiny dataset's roots with nnUNetTrainer's fold 0 trained (``train_shared_fold``), once
    per test run (``built_once``): test_training, test_upstream_exchange, test_fine_tuning_cli and
    test_new_scans each trained a fold 0 of their own; they copy this one into their ``env``
    (``copy_shared_model``)."""
    return built_once(
        tmp_path_factory,
        "trained_tiny_fold",
        lambda folder: train_shared_fold(folder, tiny_training_template),
    )


@pytest.fixture(scope="session")
def prepared_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A work_dir in which real Snakemake made the ``preprocessed`` target of
    ``prepared_config``, once per test run (``built_once``): the workflow tests that only train
    and after copy it (``copy_prepared``) instead of paying ~6 CPU s of preparing jobs each."""

    def build(folder: Path) -> None:
        snakemake(folder, prepared_config(folder / "work"), "preprocessed")
        shutil.rmtree(folder / ".snakemake")  # its records name this folder's paths

    return built_once(tmp_path_factory, "prepared_work", build) / "work"


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


# The files that take longest under `make test` (--durations, December 2026), longest first.
LONGEST_FILES = (
    "test_readme_demo.py",
    "test_workflow_pipeline.py",
    "test_workflow_paper.py",
    "test_workflow_methods.py",
    "test_stop_resume.py",
    "test_readme_walkthrough.py",
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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:  # noqa: ARG001
    """Under NNUNET_REQUIRE_PEER=1 (CI, which installs upstream with .ci/install_peer.sh) a test
    that skips for a missing upstream peer venv fails instead: CI must run the upstream tests."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or os.environ.get("NNUNET_REQUIRE_PEER") != "1":
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if "peer" in reason.lower():
        report.outcome = "failed"
        report.longrepr = f"NNUNET_REQUIRE_PEER=1, but the test skipped: {reason}"
