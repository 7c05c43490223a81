"""Who sets a fold job's resources: the config, unless a set-resources says otherwise, and then
once on the console; a GPU count against training.gpus_per_job is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml
from snakemake.cli import parse_set_resources, parse_set_threads
from snakemake.resources import Resource, Resources
from snakemake.settings.types import ResourceSettings

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow import resource_owner
from nnunet_core.workflow.resource_owner import override_lines

REPO = Path(__file__).resolve().parents[3]
CONFIG = {"training": {"mem_mb": 4000, "runtime": 600, "gpus_per_job": None, "threads": None}}


def _parsed(mapping: dict) -> dict:
    """set-resources as Snakemake parses them (``mem: 32G`` becomes mem_mb, ``2h`` 120)."""
    return {rule: Resources.from_mapping(values) for rule, values in mapping.items()}


def test_an_override_that_differs_is_one_line_naming_both_values() -> None:
    resources = _parsed({"train": {"mem": "32G", "runtime": "2h", "slurm_partition": "gpu"}})
    lines = override_lines(CONFIG, resources, {})
    assert [line.split(" (docs/clusters.md")[0] for line in lines] == [
        "rule train: mem_mb 32000 from the set-resources of a profile or the command line is "
        "used, not training.mem_mb 4000 of the config",
        "rule train: runtime 120 from the set-resources of a profile or the command line is "
        "used, not training.runtime 600 of the config",
    ]
    assert all(line.endswith('"Resources: the config or the profile")') for line in lines)


def test_agreeing_values_other_rules_and_derived_values_say_nothing() -> None:
    same = _parsed({"train": {"mem_mb": 4000, "runtime": 600}, "predict": {"mem_mb": 1}})
    assert override_lines(CONFIG, same, {}) == []
    # gpus_per_job and threads null: the workflow derives them, no config value to contradict
    derived = _parsed({"train": {"gpu": 2}})
    assert override_lines(CONFIG, derived, {"train": Resource("_cores", 4)}) == []


def test_threads_set_for_train_against_training_threads_are_said() -> None:
    config = {"training": {**CONFIG["training"], "threads": 2}}
    lines = override_lines(config, {}, {"train": Resource("_cores", 8)})
    assert len(lines) == 1 and lines[0].startswith("rule train: threads 8 from the set-threads")
    assert "not training.threads 2 of the config" in lines[0]


def test_a_gpu_count_against_gpus_per_job_is_refused() -> None:
    config = {"training": {**CONFIG["training"], "gpus_per_job": 2}}
    with pytest.raises(ConfigurationError, match=r"^config training.gpus_per_job: 2, but ") as e:
        override_lines(config, _parsed({"train": {"gpu": 1}}), {})
    assert "rule train gpu=1" in str(e.value) and "\n" not in str(e.value)
    assert override_lines(config, _parsed({"train": {"gpu": 2}}), {}) == []


class _Workflow:
    """What ``announce`` reads of Snakemake's workflow: its resource settings, Snakemake's own
    (filled as ``--set-resources`` and ``--set-threads`` fill them)."""

    def __init__(self, resources: list[str], threads: list[str] = ()) -> None:
        self.resource_settings = ResourceSettings(
            overwrite_resources=parse_set_resources(resources),
            overwrite_threads=parse_set_threads(list(threads)),
        )


def test_each_line_is_printed_once_per_process(monkeypatch) -> None:
    monkeypatch.setattr(resource_owner, "_PRINTED", set())
    workflow = _Workflow(["train:mem_mb=5000"])
    out = io.StringIO()
    assert len(resource_owner.announce(CONFIG, workflow, out)) == 1
    assert resource_owner.announce(CONFIG, workflow, out) == []  # a second run's module
    assert out.getvalue().count("\n") == 1


def test_the_settings_are_read_as_snakemake_parses_them() -> None:
    """From the public fields the command line and a profile fill: ``mem: 32G`` is mem_mb."""
    workflow = _Workflow(["train:mem=32G", "train:slurm_partition=gpu"], ["train=8"])
    resources = resource_owner.set_resources(workflow)
    assert resources["train"]["mem_mb"].value == 32000
    assert resource_owner.set_threads(workflow)["train"].value == 8
    lines = override_lines(CONFIG, resources, resource_owner.set_threads(workflow))
    assert [line.split(" from ")[0] for line in lines] == ["rule train: mem_mb 32000"]


@pytest.mark.parametrize("profile", ["slurm", "lsf"])
def test_the_profiles_leave_a_fold_jobs_config_resources_alone(profile: str) -> None:
    settings = yaml.safe_load((REPO / "profiles" / profile / "profile.yaml").read_text())
    train = settings["set-resources"]["train"]
    owned = {item.resource for item in resource_owner.CONFIG_RESOURCES}
    assert not owned & {*train, "mem"}, train
    assert "train" not in settings.get("set-threads", {})
