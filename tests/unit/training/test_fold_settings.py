"""The settings table (nnunet_core.training.fold.settings_table) is the one source of every fold
setting's name and default: the schema's training properties, config/config.yaml, the docs'
configuration reference (generated from the schema), the train parser, TrainerSettings and the
workflow's train flags agree with it, so a knob cannot have two names or two defaults again (issue
46: ``save_every`` was 10 in the schema and 1 in argparse)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
import yaml

from nnunet_core.commands.train_args import configure_parser, settings_from_args
from nnunet_core.reference.config_keys import config_reference
from nnunet_core.training.fold import settings_table
from nnunet_core.training.fold.settings_table import BY_KEY, INVALIDATING, SETTINGS, rerun_trigger
from nnunet_core.training.trainer.settings import TrainerSettings
from nnunet_core.training.trainer.variants import DEFAULT_EPOCHS
from nnunet_core.workflow.flags import training_options
from tests.helpers.paths import REPO

SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
JSON_TYPES = {
    int: "integer",
    float: "number",
    str: "string",
    bool: "boolean",
    list: "array",
    dict: "object",
    type(None): "null",
}
CONFIG_ROWS = [row for row in SETTINGS if row.in_config]


def schema_of(key: str) -> dict:
    node = SCHEMA
    for part in key.split("."):
        node = node["properties"][part]
    return node


def parsed(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure_parser(parser)
    return parser.parse_args(["900", "3d_fullres", "0", *extra])


def test_every_schema_training_key_is_a_row_and_nothing_else_is():
    schema_keys = {f"training.{k}" for k in SCHEMA["properties"]["training"]["properties"]}
    table_keys = {row.key for row in CONFIG_ROWS if row.key.startswith("training.")}
    assert schema_keys == table_keys


@pytest.mark.parametrize("row", CONFIG_ROWS, ids=lambda row: row.key)
def test_a_config_row_has_the_schema_type_and_default(row):
    node = schema_of(row.key)
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    assert sorted(types) == sorted(JSON_TYPES[t] for t in row.types)
    assert node["default"] == row.default


def test_config_yaml_states_the_table_defaults():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    stated = 0
    for row in CONFIG_ROWS:
        try:
            value = settings_table.config_value(config, row.key)
        except KeyError:
            continue  # config.yaml need not list every key (pretrained_weights is commented)
        assert value == row.default, row.key
        stated += 1
    assert stated >= 20


def test_the_configuration_reference_states_the_table_defaults():
    text = config_reference(SCHEMA)
    stated = {}
    for keys, defaults in re.findall(r"^\| (`[^|]+`) \| (`[^|]+`) \|", text, re.MULTILINE):
        names = re.findall(r"`([^`]+)`", keys)
        values = re.findall(r"`([^`]+)`", defaults)
        if len(names) == len(values):
            stated.update(zip(names, values, strict=True))
    listed = [row for row in CONFIG_ROWS if row.key in stated]
    assert len(listed) >= 20
    for row in listed:
        assert yaml.safe_load(stated[row.key]) == row.default, row.key


def test_trainer_settings_defaults_are_the_table_defaults():
    defaults = TrainerSettings()
    rows = [row for row in SETTINGS if row.attribute and row.attribute != "optimizer"]
    assert {row.attribute for row in rows} >= {"num_iterations", "save_every", "seed"}
    for row in rows:
        assert getattr(defaults, row.attribute) == row.default, row.key
    assert DEFAULT_EPOCHS == BY_KEY["training.epochs"].default


def test_the_parser_defaults_are_the_table_defaults():
    args = parsed()
    dests = {
        "--iterations": "iterations",
        "--val-iterations": "val_iterations",
        "--save-every": "save_every",
        "--seed": "seed",
        "--stop-margin": "stop_margin",
        "--num-workers": "num_workers",
        "--gpu-lock-dir": "gpu_lock_dir",
        "--npz": "npz",
        "--deterministic": "deterministic",
        "-device": "device",
        "-tr": "trainer",
        "-pretrained_weights": "pretrained_weights",
        "-num_gpus": "num_gpus",
        "--epochs": "epochs",
        "--deadline": "deadline",
        "-p": "plans",
    }
    flagged = [row for row in SETTINGS if row.flag and not row.flag.isupper()]
    assert {row.flag for row in flagged} == set(dests)
    for row in flagged:
        assert getattr(args, dests[row.flag]) == row.parser_default, row.flag
    settings = settings_from_args(args)
    assert settings.save_every == 10 == BY_KEY["training.save_every"].default
    assert settings.num_epochs == BY_KEY["training.epochs"].default


def test_the_workflow_flags_reach_the_parser_as_the_config_says():
    config = {
        "seed": 7,
        "deterministic": True,
        "training": {
            "trainer": "nnUNetTrainer",
            "epochs": 3,
            "iterations_per_epoch": 5,
            "val_iterations_per_epoch": 2,
            "save_every": 4,
            "stop_margin": 60,
            "num_workers": 0,
            "npz": True,
        },
    }
    args = parsed(*shlex.split(training_options(config, "nnUNetPlans", "cpu")))
    settings = settings_from_args(args)
    for row in SETTINGS:
        if row.in_config and row.attribute and row.attribute != "optimizer":
            assert getattr(settings, row.attribute) == settings_table.config_value(config, row.key)
    assert args.deterministic and args.npz and args.stop_margin == 60


def test_the_invalidating_settings_are_those_the_issue_names():
    assert set(INVALIDATING) == {
        "training.trainer",
        "training.epochs",
        "training.iterations_per_epoch",
        "training.val_iterations_per_epoch",
        "seed",
        "deterministic",
        "configuration",
        "fold",
        "plans_name",
        "plans_sha256",
        "splits_sha256",
        "trainer_source_sha256",
        "pretrained_weights_sha256",
        "optimizer",
    }
    for key in ("training.save_every", "training.num_workers", "training.device"):
        assert not BY_KEY[key].invalidates


def test_the_rerun_trigger_holds_only_invalidating_values():
    values = {"training.iterations_per_epoch": 5, "training.save_every": 1, "seed": 0}
    assert rerun_trigger(values) == "training.iterations_per_epoch=5 seed=0"
    values["training.iterations_per_epoch"] = 2
    assert rerun_trigger(values) == "training.iterations_per_epoch=2 seed=0"
