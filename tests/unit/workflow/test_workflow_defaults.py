"""The workflow's defaults for a user's dataset: typed --config values, the automatic GPU count."""

from __future__ import annotations

import pytest
import yaml

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.config import check_config, coerce_command_line_values, schema_errors
from nnunet_core.workflow.devices import (
    cpu_schedule_warning,
    gpus_per_fold_job,
    requested_gpus,
    visible_gpu_count,
)
from tests.helpers.paths import REPO

SCHEMA_FILE = REPO / "workflow" / "schemas" / "config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_FILE.read_text())


def snakemake_reads(**entries: str) -> dict:
    """What Snakemake 9 makes of `--config key=value ...` (its own parser)."""
    from snakemake.cli import parse_config

    return parse_config([f"{key}={value}" for key, value in entries.items()])


def test_nested_config_values_from_the_command_line_get_their_schema_types() -> None:
    given = snakemake_reads(
        dataset="{id: 4, name: Hippocampus, raw_root: /data/nnUNet_raw}",
        training=(
            "{folds: [0, 1, all], epochs: 20, gpus_per_job: null, npz: false, stop_margin: 2.5}"
        ),
        deterministic="true",
    )
    assert given["dataset"]["id"] == "4", "Snakemake changed its --config parser"
    config = yaml.safe_load(yaml.safe_dump(given))
    coerce_command_line_values(config, given, SCHEMA)
    assert config["dataset"] == {"id": 4, "name": "Hippocampus", "raw_root": "/data/nnUNet_raw"}
    assert config["training"] == {
        "folds": [0, 1, "all"],
        "epochs": 20,
        "gpus_per_job": None,
        "npz": False,
        "stop_margin": 2.5,
    }
    assert config["deterministic"] is True
    assert schema_errors(config, SCHEMA_FILE) == []


def test_strings_the_schema_wants_stay_strings() -> None:
    given = snakemake_reads(dataset="{id: 4, name: '007', raw_root: '123'}")
    config = {"dataset": dict(given["dataset"])}
    coerce_command_line_values(config, given, SCHEMA)
    assert config["dataset"] == {"id": 4, "name": "007", "raw_root": "123"}


def test_override_values_without_a_schema_type_are_read_as_yaml() -> None:
    given = snakemake_reads(
        planning="{overrides: {3d_small: {inherits_from: 3d_fullres, batch_size: 4}}}"
    )
    config = yaml.safe_load(yaml.safe_dump(given))
    coerce_command_line_values(config, given, SCHEMA)
    small = config["planning"]["overrides"]["3d_small"]
    assert small == {"inherits_from": "3d_fullres", "batch_size": 4}


def test_values_from_a_config_file_are_left_alone() -> None:
    config = {"dataset": {"id": "4", "name": "X"}}
    coerce_command_line_values(config, {}, SCHEMA)
    assert config["dataset"]["id"] == "4"


@pytest.mark.parametrize(
    ("setting", "cluster", "requested", "visible", "expected"),
    [
        (None, False, 0, 0, 0),  # a laptop: the CPU
        (None, True, 0, 0, 1),  # SLURM: the login node has no GPU, the jobs do
        (None, False, 4, 0, 1),  # --resources gpu=4: one GPU per fold job
        (None, False, 0, 2, 1),  # GPUs on this machine
        (0, True, 4, 2, 0),  # the user's setting wins
        (2, False, 0, 0, 2),
    ],
)
def test_gpus_per_fold_job(setting, cluster, requested, visible, expected) -> None:
    assert (
        gpus_per_fold_job(setting, cluster=cluster, requested=requested, visible=visible)
        == expected
    )


def test_visible_gpus_from_cuda_visible_devices_else_the_driver(tmp_path) -> None:
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    for bus in ("0000:01:00.0", "0000:02:00.0"):
        (gpus / bus).mkdir()
    assert visible_gpu_count({}, gpus) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "3"}, gpus) == 1
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}, gpus) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}, gpus) == 0
    assert visible_gpu_count({}, tmp_path / "no-driver") == 0


def test_requested_gpus_reads_snakemake_resources() -> None:
    class Parsed:
        value = 4

    assert requested_gpus({"gpu": Parsed()}) == 4
    assert requested_gpus({"gpu": 2}) == 2
    assert requested_gpus({"_cores": 8}) == 0


def test_cpu_warning_only_for_a_long_schedule_without_gpus() -> None:
    line = cpu_schedule_warning("auto", 0, 1000, 250)
    assert line is not None and "1000 epochs x 250 iterations" in line and "CPU" in line
    assert cpu_schedule_warning("auto", 1, 1000, 250) is None
    assert cpu_schedule_warning("auto", 0, 3, 10) is None
    assert cpu_schedule_warning("cuda", 0, 1000, 250) is None


def test_user_template_holds_the_schema_defaults() -> None:
    """config/config.yaml (what a user copies) says exactly what the schema fills in."""
    template = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    properties = SCHEMA["properties"]
    for section, values in template.items():
        if section == "dataset":
            continue
        if isinstance(values, dict):
            for key, value in values.items():
                assert value == properties[section]["properties"][key]["default"], (section, key)
        else:
            assert values == properties[section]["default"], section


def test_an_unknown_trainer_stops_the_workflow_before_any_job() -> None:
    config = {
        "dataset": {"id": 4, "name": "X", "synthetic": {"enabled": True}},
        "training": {"trainer": "nnUNetTrainerNoMirroring"},
    }
    check_config(config)
    config["training"]["trainer"] = "nnUNetTrainerBogus"
    with pytest.raises(
        ConfigurationError,
        match=r"training\.trainer: unknown trainer 'nnUNetTrainerBogus' \(known: nnUNetTrainer, ",
    ):
        check_config(config)
