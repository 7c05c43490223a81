"""Several datasets and seeds in one workflow run, and where each run's files live.

A config names one dataset (``dataset``) or several (``datasets``, each with its own raw root,
synthetic settings and ``planning`` keys over the shared ones), and one seed (``seed``) or
several (``seeds``). One dataset and one seed is the plain run of ``workflow/rules/run.smk``.
More become one run per (dataset, seed): each a complete one-dataset, one-seed config that
``workflow/rules/paper.smk`` loads as a Snakemake module, so every stage is a job of its own.

The trees stay upstream's: the preprocessed data is per dataset (``work/preprocessed/<Dataset>``,
shared by its seeds); with several seeds each seed's results, predictions and logs live under
``seed_<n>``: ``work/results/seed_1`` is a complete ``nnUNet_results`` folder. With ``methods``
(``nnunet_core.workflow.methods``) each (dataset, seed, method) is a run, named
``<Dataset>_seed<n>_<method>`` and filed under ``<method>/`` (``work/results/<method>/seed_1``).
"""

from __future__ import annotations

import copy
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.predictions import PREDICTIONS_FOLDER, TEST_SUMMARY_JSON
from nnunet_core.layout.raw import labels_ts_dir
from nnunet_core.layout.results import REPORT_PAGE_MD, report_dir
from nnunet_core.layout.roots import (
    DATASET_NAME_RE,
    Roots,
    dataset_folder_name,
    raw_dataset_dir,
    results_dataset_dir,
)
from nnunet_core.layout.work import (
    DEFAULT_WORK_DIR,
    WORK_LOGS,
    WORK_RAW,
    method_folder_name,
    seed_folder_name,
)
from nnunet_core.workflow import msd_source
from nnunet_core.workflow.methods import apply_method, methods_of
from nnunet_core.workflow.planner_checks import check_one_planner_per_plans, check_planners


def check_run_keys(config: dict[str, Any]) -> None:
    """One dataset key and one seed key, no dataset or seed twice (before the schema fills in
    ``seed: 0``: a config giving both would otherwise run something it did not ask for); or
    ``predict`` alone (segmenting new scans trains nothing)."""
    if "predict" in config:
        other = [k for k in ("dataset", "datasets", "seeds", "methods") if k in config]
        if other:
            msg = (
                f"config: predict segments new scans with a trained model; {', '.join(other)} "
                "would train one (run them separately)"
            )
            raise ConfigurationError(msg)
        return
    if "dataset" in config and "datasets" in config:
        msg = "config: set dataset (one) or datasets (several), not both"
        raise ConfigurationError(msg)
    if "dataset" not in config and "datasets" not in config:
        msg = "config: name a dataset (dataset: {id, name, raw_root}) or several (datasets: [...])"
        raise ConfigurationError(msg)
    if "seed" in config and config.get("seeds"):
        msg = f"config: set seed or seeds, not both (seeds: {config['seeds']} runs every seed)"
        raise ConfigurationError(msg)
    if "method" in config:
        msg = "config: method is set per run from methods:, not by hand; list the methods there"
        raise ConfigurationError(msg)
    methods_of(config)
    check_planners(config)
    ids = [entry["id"] for entry in config.get("datasets") or []]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        msg = f"config datasets: dataset id {twice[0]} given twice"
        raise ConfigurationError(msg)


def raw_root_of(dataset: dict[str, Any], work_dir: str | Path) -> Path:
    """The raw root of a config's ``dataset``: the one the user named, or ``work_dir/raw`` where
    the workflow synthesizes the data itself (the demo). A real dataset without ``raw_root`` (also
    an unset ``$nnUNet_raw`` on the command line, which leaves it empty) is an error naming the
    key and the value, never a folder the user did not choose."""
    raw_root = dataset.get("raw_root")
    if dataset.get("synthetic", {}).get("enabled", False):
        return Path(work_dir) / WORK_RAW
    # an MSD task is converted into it by the run's first job
    if raw_root is None and msd_source.msd_task_of(dataset) is not None:
        return Path(work_dir) / WORK_RAW
    if raw_root is None or not str(raw_root).strip():
        shown = "null" if raw_root is None else repr(raw_root)
        folder = dataset_folder_name(dataset["id"], dataset["name"])
        msg = (
            f"config dataset.raw_root: {shown} is empty: set it to the folder that holds "
            f"{folder}/ (your nnUNet_raw; an unset $nnUNet_raw on the command line leaves it empty)"
        )
        raise ConfigurationError(msg)
    return Path(raw_root)


def check_raw_dataset(config: dict[str, Any]) -> None:
    """A real dataset's folder is in ``dataset.raw_root`` before any job, else one line: an empty
    ``raw_root`` names the key and the value, a missing one the folder, a wrong id or name the
    datasets that are there (instead of Snakemake's MissingInputException)."""
    dataset = config["dataset"]
    root = raw_root_of(dataset, config.get("work_dir", DEFAULT_WORK_DIR))
    folder = dataset_folder_name(dataset["id"], dataset["name"])
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "no such folder"
        msg = f"config dataset.raw_root: {root}: {what} (it should hold {folder}/)"
        raise ConfigurationError(msg)
    if not (root / folder).is_dir():
        found = sorted(
            p.name for p in root.iterdir() if p.is_dir() and DATASET_NAME_RE.match(p.name)
        )
        msg = (
            f"config dataset: {folder} is not in raw_root {root} (datasets there: "
            f"{', '.join(found) or 'none'})"
        )
        raise ConfigurationError(msg)


def _folder_of(entry: dict[str, Any]) -> str:
    return dataset_folder_name(entry["id"], entry["name"])


def _datasets(config: dict[str, Any]) -> list[dict[str, Any]]:
    return list(config["datasets"]) if "datasets" in config else [config["dataset"]]


def _seeds(config: dict[str, Any]) -> list[int]:
    return list(config["seeds"]) if config.get("seeds") else [config.get("seed", 0)]


def is_several_runs(config: dict[str, Any]) -> bool:
    """More than one (dataset, seed), or methods: the paper workflow; else the plain run."""
    return bool(config.get("methods")) or len(_datasets(config)) * len(_seeds(config)) > 1


@dataclass(frozen=True)
class RunInstance:
    """One (dataset, seed[, method]) of a run: its rule prefix and its own complete config."""

    name: str
    dataset: str
    seed: int
    config: dict[str, Any]
    method: str | None = None
    baseline: bool = True  # with methods: this run's method is the baseline

    @property
    def tree(self) -> RunTree:
        return RunTree.of_config(self.config)

    def test_summary(self) -> list[Path]:
        """The run's test summary, where its test set has labels (else none)."""
        tree = self.tree
        raw = raw_dataset_dir(tree.roots, tree.dataset)
        return [tree.test_summary] if test_set_of(self.config, raw)[1] else []

    def report_page(self) -> Path:
        return report_dir(self.tree.results_dir) / REPORT_PAGE_MD

    def plans_name(self) -> str:
        """``planning.plans_name``, else the planner's (nnUNetPlans, nnUNetResEncUNetMPlans, a
        user's planner's ``default_plans_name()``)."""
        from nnunet_core.planning.user_planner import default_plans_name

        planning = self.config["planning"]
        return planning.get("plans_name") or default_plans_name(planning.get("planner", "default"))


def _dataset_and_planning(
    config: dict[str, Any], entry: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ``datasets`` entry as ``dataset``, and its planning keys over the shared ones."""
    dataset = {k: v for k, v in entry.items() if k != "planning"}
    return dataset, {**config.get("planning", {}), **entry.get("planning", {})}


def _run_config(
    config: dict[str, Any], entry: dict[str, Any], seed: int, seeds: list[int]
) -> dict[str, Any]:
    """The config of one (dataset, seed): the shared keys, the entry's dataset, its planning
    keys over the shared ones, this seed (``seeds`` kept: more than one puts it in a folder)."""
    dropped = ("datasets", "seed", "methods")
    run = copy.deepcopy({k: v for k, v in config.items() if k not in dropped})
    run["dataset"], run["planning"] = _dataset_and_planning(config, copy.deepcopy(entry))
    run["seed"] = seed
    run["seeds"] = list(seeds)
    return run


def as_single_run(config: dict[str, Any]) -> None:
    """One dataset and one seed, in place, in the plain run's form: ``datasets: [entry]``
    becomes ``dataset`` (its planning keys over the shared ones), ``seeds: [n]`` ``seed: n``."""
    if "datasets" in config:
        (entry,) = config.pop("datasets")
        config["dataset"], config["planning"] = _dataset_and_planning(config, entry)
    seeds = config.pop("seeds", None)
    if seeds:
        (config["seed"],) = seeds


def run_instances(config: dict[str, Any]) -> list[RunInstance]:
    """Every (dataset, seed[, method]), datasets in the config's order, seeds within each, the
    methods (baseline first) within each seed."""
    seeds = _seeds(config)
    methods = methods_of(config)
    instances = []
    for entry in _datasets(config):
        folder = _folder_of(entry)
        for seed in seeds:
            name = re.sub(r"\W", "_", f"{folder}_seed{seed}")
            if not methods:
                run = _run_config(config, entry, seed, seeds)
                _tag_tracked_runs(run, folder, seed)
                instances.append(RunInstance(name, folder, seed, run))
            for method in methods:
                run = _run_config(config, entry, seed, seeds)
                apply_method(run, method)
                _tag_tracked_runs(run, folder, seed, method.name)
                instances.append(
                    RunInstance(
                        f"{name}_{method.name}", folder, seed, run, method.name, method.baseline
                    )
                )
    check_one_planner_per_plans(
        (r.dataset, str(r.method), r.config["planning"].get("planner", "default"), r.plans_name())
        for r in instances
        if r.method
    )
    _one_plan_rule_per_dataset_json(instances)
    return instances


def _tag_tracked_runs(run: dict[str, Any], dataset: str, seed: int, method: str = "") -> None:
    """The tracking tags of a paper-mode run's folds (config ``tracking.tags``): dataset, seed
    and method, so that an MLflow or W&B view groups and compares them."""
    tracking = run.setdefault("tracking", {})
    tags = {"dataset": dataset, "seed": str(seed), **({"method": method} if method else {})}
    tracking["tags"] = {**tracking.get("tags", {}), **tags}


def _one_plan_rule_per_dataset_json(instances: list[RunInstance]) -> None:
    """Only the runs planned as the baseline's (the same plans name) declare the dataset's
    preprocessed dataset.json; a method with another planner writes it too, undeclared (the
    same copy of the raw dataset.json). Adding a method never moves the declaration."""
    baseline_plans = {r.dataset: r.plans_name() for r in instances if r.method and r.baseline}
    for run in instances:
        if run.method:
            writes = run.plans_name() == baseline_plans[run.dataset]
            run.config["method"]["writes_dataset_json"] = writes


@dataclass(frozen=True)
class RunTree:
    """Where one (dataset, seed) run keeps its files (``run_paths.RunPaths`` and paper.smk)."""

    work: Path
    dataset: str
    raw_root: Path
    seed_folder: str | None
    method_folder: str | None = None

    @classmethod
    def of_config(cls, config: dict[str, Any]) -> RunTree:
        dataset = config["dataset"]
        work = Path(config["work_dir"])
        several = len(config.get("seeds") or []) > 1
        folder = seed_folder_name(config["seed"]) if several else None
        name = dataset_folder_name(dataset["id"], dataset["name"])
        method = config.get("method")
        method_folder = method_folder_name(method["name"]) if method else None
        return cls(work, name, raw_root_of(dataset, work), folder, method_folder)

    def _per_seed(self, folder: Path) -> Path:
        """``folder[/<method>][/seed_<n>]``: what is this run's own (not the dataset's)."""
        if self.method_folder:
            folder = folder / self.method_folder
        return folder / self.seed_folder if self.seed_folder else folder

    @property
    def roots(self) -> Roots:
        base = Roots.in_work_dir(self.work, raw=self.raw_root)
        assert base.results is not None
        return Roots(base.raw, base.preprocessed, self._per_seed(base.results))

    @property
    def results_dir(self) -> Path:
        return results_dataset_dir(self.roots, self.dataset)

    @property
    def predictions_dir(self) -> Path:
        return self._per_seed(self.work / PREDICTIONS_FOLDER) / self.dataset

    @property
    def test_summary(self) -> Path:
        return self.predictions_dir / TEST_SUMMARY_JSON

    @property
    def logs(self) -> Path:
        """Logs of the seed's jobs (training on)."""
        return self._per_seed(self.work / WORK_LOGS) / self.dataset

    @property
    def dataset_logs(self) -> Path:
        """Logs of the dataset's jobs up to preprocessing, shared by its seeds."""
        return self.work / WORK_LOGS / self.dataset


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(
        p.is_file() and not p.name.startswith(".") for p in folder.iterdir()
    )


def test_set_of(config: dict[str, Any], raw_dir: Path) -> tuple[bool, bool]:
    """(has a test set, has test labels): synthetic data has both when it makes test cases;
    real data has what its raw folder holds (imagesTs/ with images in it, labelsTs/)."""
    dataset = config["dataset"]
    if dataset.get("synthetic", {}).get("enabled", False):
        has_test = dataset["synthetic"]["num_test"] > 0
        return has_test, has_test
    has_test = _has_files(msd_source.test_images_folder(dataset, raw_dir))
    return has_test, has_test and labels_ts_dir(raw_dir).is_dir()


NO_TEST_IMAGES = "no test images: test prediction and evaluation skipped"


def incomplete_test_set_notice(config: dict[str, Any], raw_dir: Path) -> str | None:
    """The line a run prints at its start (and its report keeps) when the test set is not
    complete: no test images, or images without labels; None for a complete one."""
    has_images, has_labels = test_set_of(config, raw_dir)
    images = msd_source.test_images_folder(config["dataset"], raw_dir)
    labels = labels_ts_dir(raw_dir)
    if not has_images:
        if config["dataset"].get("synthetic", {}).get("enabled", False):
            why = "dataset.synthetic.num_test is 0"
        else:
            why = f"{images} is empty" if images.is_dir() else f"no folder {images}"
        return f"{NO_TEST_IMAGES} ({why})"
    if not has_labels:
        return f"test images without labels (no folder {labels}): test evaluation skipped"
    return None


def paper_table_flags(instances: list[RunInstance]) -> str:
    """``--run RESULTS_DIR SEED [TEST_SUMMARY]`` of every run, for ``nnunet-core paper-table``."""
    flags = []
    for run in instances:
        values = [run.tree.results_dir, run.seed, *run.test_summary()]
        flags.append("--run " + " ".join(shlex.quote(str(v)) for v in values))
    return " ".join(flags)


def methods_table_flags(instances: list[RunInstance]) -> str:
    """``--run METHOD RESULTS_DIR SEED [TEST_SUMMARY]`` of every run, and ``--baseline``, for
    ``nnunet-core methods-table``."""
    flags = []
    for run in instances:
        values = [run.method, run.tree.results_dir, run.seed, *run.test_summary()]
        flags.append("--run " + " ".join(shlex.quote(str(v)) for v in values))
        if run.baseline:
            baseline = f"--baseline {shlex.quote(str(run.method))}"
    return " ".join([baseline, *flags])


def reproduce_run_flags(instances: list[RunInstance]) -> str:
    """``--run RAW_DATASET PLANS RESULTS_DATASET`` of every run, for ``nnunet-core reproduce
    pack``."""
    flags = []
    for run in instances:
        tree = run.tree
        values = [
            raw_dataset_dir(tree.roots, tree.dataset),
            run.plans_name(),
            tree.results_dir,
        ]
        flags.append("--run " + " ".join(shlex.quote(str(v)) for v in values))
    return " ".join(flags)
