"""Workflow config values that used to get through (issue 14), at the level of ``check_config``
(what common.smk calls): each is refused before any work starts, with one line naming the key
and the value. The real Snakemake runs are in tests/integration/test_bad_config_values.py; the
command-line values in tests/unit/commands/test_bad_values.py. Every case is one parametrized
entry with an id.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.workflow.config import Execution, check_config

DATASET = "Dataset900_Synth"
CASES = [f"synth_{i:03d}" for i in range(6)]
LOCAL_RUN = Execution()  # `snakemake --cores N`: no dry run, no --jobs, not inside a job


def _config(**training) -> dict:
    return {
        "work_dir": "work",
        "dataset": {"id": 900, "name": "Synth", "synthetic": {"enabled": True}},
        "planning": {"configurations": None, "overrides": {}},
        "training": {"trainer": "nnUNetTrainer", "folds": [0, 1, 2, 3, 4], "nodes": 1, **training},
        "splits": {"num_folds": 5},
    }


# ------------------------------------------------------------------ workflow config values
BAD_CONFIGS = [
    pytest.param(
        _config(folds=[7]),
        r"^config training\.folds: fold 7 does not exist: splits\.num_folds is 5, so the folds "
        r"are 0-4 \(or 'all'\)$",
        id="config-folds-7-of-5",
    ),
    pytest.param(
        _config(folds=[0, 5]),
        r"^config training\.folds: fold 5 does not exist: splits\.num_folds is 5",
        id="config-folds-5-of-5",
    ),
    pytest.param(
        _config(folds=[-1]),
        r"^config training\.folds: fold -1 does not exist",
        id="config-folds-minus-1",
    ),
    pytest.param(
        _config(folds=[0, 0]),
        r"^config training\.folds: fold 0 is listed twice in \[0, 0\]$",
        id="config-folds-duplicate",
    ),
    pytest.param(
        _config(folds=["all", 1, "all"]),
        r"^config training\.folds: fold all is listed twice",
        id="config-folds-all-twice",
    ),
    pytest.param(
        _config(folds=[1, "1"]),
        r"^config training\.folds: fold 1 is listed twice",
        id="config-folds-same-fold-as-text",
    ),
    pytest.param(
        _config(folds=["ALL"]),
        r"^config training\.folds: 'ALL' is not a fold \(a number >= 0, or 'all'\)$",
        id="config-folds-not-a-fold",
    ),
    pytest.param(
        _config(trainer="nnUNetTrainerBogus"),
        r"^config training\.trainer: unknown trainer 'nnUNetTrainerBogus' \(known: nnUNetTrainer,",
        id="config-trainer-unknown",
    ),
    pytest.param(
        _config(trainer="nnUNetTrainer_0epochs"),
        r"^config training\.trainer: unknown trainer 'nnUNetTrainer_0epochs'",
        id="config-trainer-0epochs",
    ),
    pytest.param(
        _config(trainer="/no/such/folder/mine.py:MyTrainer"),
        r"^config training\.trainer: trainer '/no/such/folder/mine\.py:MyTrainer': "
        r"/no/such/folder/mine\.py: file not found$",
        id="config-trainer-file-missing",
    ),
    pytest.param(
        _config(nodes=2),
        r"^config training\.nodes: 2 needs the SLURM executor \(--profile profiles/slurm\)",
        id="config-nodes-2-local-run",
    ),
    pytest.param(
        {**_config(), "planning": {"configurations": ["3d_fulres"], "overrides": {}}},
        r"^config planning\.configurations: '3d_fulres' is no configuration the planner makes or "
        r"planning\.overrides defines \(possible: 2d, 3d_fullres, 3d_lowres, 3d_cascade_fullres\)$",
        id="config-configurations-typo",
    ),
    pytest.param(
        {
            **_config(),
            "planning": {
                "configurations": None,
                "overrides": {"ensemble": {"inherits_from": "2d"}},
            },
        },
        r"^config planning\.overrides: 'ensemble' cannot name a configuration \(letters, digits "
        r"and _ only, and not ensemble or final: folders of the test predictions\)$",
        id="config-override-named-ensemble",
    ),
]


@pytest.mark.parametrize(("config", "message"), BAD_CONFIGS)
def test_a_bad_config_value_is_one_line_naming_the_key(config: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        check_config(config, LOCAL_RUN)
    assert "\n" not in str(caught.value)


def test_folds_beyond_a_splits_file_in_the_raw_dataset(tmp_path: Path) -> None:
    """A user's raw splits_final.json (the splits rule copies it) sets the fold count."""
    raw = tmp_path / "raw"
    (raw / DATASET).mkdir(parents=True)
    user_file = raw / DATASET / "splits_final.json"
    user_file.write_text(json.dumps([{"train": ["a"], "val": ["b"]}] * 3))
    config = _config(folds=[0, 1, 2])
    config["dataset"] = {"id": 900, "name": "Synth", "raw_root": str(raw)}
    config["splits"]["num_folds"] = 10
    check_config(config, LOCAL_RUN)
    config["training"]["folds"] = [3]
    with pytest.raises(
        ConfigurationError,
        match=rf"fold 3 does not exist: {user_file} has 3 folds, 0-2 \(or 'all'\)$",
    ):
        check_config(config, LOCAL_RUN)


@pytest.mark.parametrize(
    ("training", "planning"),
    [
        pytest.param({"folds": [0, 1, 2, 3, 4, "all"]}, {}, id="every-fold-and-all"),
        pytest.param({"folds": ["3"]}, {}, id="fold-as-text"),
        pytest.param({"trainer": "nnUNetTrainer_5epochs_NoMirroring"}, {}, id="trainer-variant"),
        pytest.param(
            {"trainer": "my_lab.trainers:MyTrainer"}, {}, id="trainer-module-not-imported"
        ),
        pytest.param(
            {},
            {"configurations": ["3d_small"], "overrides": {"3d_small": {"inherits_from": "2d"}}},
            id="configuration-from-overrides",
        ),
        pytest.param({}, {"configurations": ["3d_lowres"]}, id="configuration-the-plans-decide"),
    ],
)
def test_good_values_pass(training: dict, planning: dict) -> None:
    config = _config(**training)
    config["planning"].update(planning)
    check_config(config, LOCAL_RUN)


@pytest.mark.parametrize(
    "execution",
    [
        pytest.param(Execution(dry_run=True), id="dry-run"),
        pytest.param(Execution(max_jobs=50), id="cluster-executor-jobs"),
        pytest.param(Execution(remote_job=True), id="inside-the-slurm-job"),
        pytest.param(None, id="outside-snakemake"),
    ],
)
def test_several_nodes_where_a_cluster_may_run_the_jobs(execution: Execution | None) -> None:
    """Snakemake names the executor only after parsing; what it does tell is enough here."""
    check_config(_config(nodes=2, gpus_per_job=2), execution)


# ------------------------------------------------------------------ where the raw dataset is
def _real(raw_root: object, dataset_id: int = 900) -> dict:
    config = _config()
    config["dataset"] = {"id": dataset_id, "name": "Synth", "raw_root": raw_root}
    return config


@pytest.mark.parametrize(
    ("raw_root", "shown"),
    [
        pytest.param(None, "null", id="null"),  # `raw_root: $nnUNet_raw` with the variable unset
        pytest.param("", "''", id="empty"),
        pytest.param("  ", "'  '", id="blank"),
    ],
)
def test_an_empty_raw_root_names_the_key_and_the_value(raw_root, shown) -> None:
    """No fallback to work_dir/raw, a folder the user never chose (issue 36)."""
    with pytest.raises(ConfigurationError) as caught:
        check_config(_real(raw_root), LOCAL_RUN)
    assert str(caught.value) == (
        f"config dataset.raw_root: {shown} is empty: set it to the folder that holds "
        f"{DATASET}/ (your nnUNet_raw; an unset $nnUNet_raw on the command line leaves it empty)"
    )


def test_a_raw_root_that_is_no_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check_config(_real(str(tmp_path / "nowhere")), LOCAL_RUN)
    assert str(caught.value) == (
        f"config dataset.raw_root: {tmp_path / 'nowhere'}: no such folder "
        f"(it should hold {DATASET}/)"
    )


def test_a_wrong_dataset_id_lists_the_datasets_there(tmp_path: Path) -> None:
    for name in ("Dataset004_Hippocampus", DATASET, "notes"):
        (tmp_path / name).mkdir()
    check_config(_real(str(tmp_path)), LOCAL_RUN)  # the right id passes
    with pytest.raises(ConfigurationError) as caught:
        check_config(_real(str(tmp_path), dataset_id=901), LOCAL_RUN)
    assert str(caught.value) == (
        f"config dataset: Dataset901_Synth is not in raw_root {tmp_path} (datasets there: "
        f"Dataset004_Hippocampus, {DATASET})"
    )
