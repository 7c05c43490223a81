"""Workflow config values that used to get through (issue 14), through the real Snakemake.

Each is refused while the Snakefile is parsed (a dry run is enough, except ``training.nodes``,
which a dry run may preview): exit 2 and one line naming the key and the value (no Snakemake
``ConfigurationError in file ...`` header, no frames), no InputFunctionException, no traceback,
nothing under work_dir. A chosen configuration that the planner makes but did not plan for this
dataset can only be known from the plans: the run stops right after the plan job, with one line.
The check_config-level cases are in tests/unit/workflow/test_check_config.py.
"""

from __future__ import annotations

import pytest

from tests.helpers.workflow import DATASET, snakemake, tiny_config


def _lines(result) -> list[str]:
    return (result.stdout + result.stderr).splitlines()


def _assert_one_clear_line(result, message: str) -> None:
    output = result.stdout + result.stderr
    assert message in _lines(result), output
    assert "InputFunctionException" not in output and "Traceback" not in output, output


# training.folds end to end: one fold beyond the default count and one beyond a count the config
# sets; the other fold refusals (-1, a fold listed twice, ...) are check_config's same one-line
# error through the same one_line_errors path, tested in tests/unit/workflow/test_check_config.py
BAD_VALUES = [
    pytest.param(
        {"training": {"folds": [7]}},
        "-n",
        "config training.folds: fold 7 does not exist: splits.num_folds is 5, so the folds are "
        "0-4 (or 'all')",
        id="workflow-folds-7",
    ),
    pytest.param(
        {"training": {"folds": [2]}, "splits": {"num_folds": 2}},
        "-n",
        "config training.folds: fold 2 does not exist: splits.num_folds is 2, so the folds are "
        "0-1 (or 'all')",
        id="workflow-folds-2-of-2",
    ),
    pytest.param(
        {"training": {"trainer": "nnUNetTrainerBogus"}},
        "-n",
        "config training.trainer: unknown trainer 'nnUNetTrainerBogus' (known: nnUNetTrainer, "
        "nnUNetTrainer_<N>epochs, nnUNetTrainer_1epoch, nnUNetTrainer_<N>epochs_NoMirroring, "
        "nnUNetTrainerNoMirroring, nnUNetTrainer_onlyMirror01, nnUNetTrainer_onlyMirror01_1500ep, "
        "nnUNetTrainerNoDeepSupervision, nnUNetTrainer_noDummy2DDA; N >= 1; or your own: "
        "package.module:Class, /path/to/file.py:Class, a Class in $nnUNet_extTrainer)",
        id="workflow-trainer-unknown",
    ),
    pytest.param(
        {"training": {"nodes": 2}},
        "all",  # a real local run: a dry run may preview the multi-node commands
        "config training.nodes: 2 needs the SLURM executor (--profile profiles/slurm), whose jobs "
        "span several nodes; this run executes every job on this machine: set training.nodes: 1 "
        "(and training.gpus_per_job for several GPUs here)",
        id="workflow-nodes-2-local-run",
    ),
    pytest.param(
        {"planning": {"configurations": ["3d_fulres"]}},
        "-n",
        "config planning.configurations: '3d_fulres' is no configuration the planner makes or "
        "planning.overrides defines (possible: 2d, 3d_fullres, 3d_lowres, 3d_cascade_fullres)",
        id="workflow-configurations-typo",
    ),
]


def _with(config: dict, changes: dict) -> dict:
    for section, values in changes.items():
        config[section] = {**config[section], **values}
    return config


@pytest.mark.parametrize(("changes", "target", "message"), BAD_VALUES)
def test_a_bad_config_value_stops_the_workflow_before_any_job(
    tmp_path, changes: dict, target: str, message: str
) -> None:
    config = _with(tiny_config(tmp_path / "work"), changes)
    result = snakemake(tmp_path, config, target, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "ConfigurationError" not in result.stdout + result.stderr
    _assert_one_clear_line(result, message)
    assert not (tmp_path / "work").exists()


def test_a_dry_run_previews_several_nodes(tmp_path) -> None:
    """Snakemake names the executor only after parsing; a dry run runs nothing, so it may show
    the srun + torchrun commands of `training.nodes: 2` without SLURM."""
    config = _with(tiny_config(tmp_path / "work"), {"training": {"nodes": 2, "gpus_per_job": 2}})
    snakemake(tmp_path, config, "-n")
    assert not (tmp_path / "work").exists()


NOT_PLANNED = (
    "ConfigurationError: config planning.configurations: 3d_lowres not in the plans nnUNetPlans "
    "of this dataset (planned: 2d, 3d_fullres)"
)


@pytest.fixture(scope="module")
def lowres_not_planned(tmp_path_factory):
    """A real run asking for 3d_lowres, which the tiny dataset's plans lack (images too small)."""
    workdir = tmp_path_factory.mktemp("not_planned")
    config = tiny_config(workdir / "work")
    config["planning"]["configurations"] = ["3d_lowres"]
    first = snakemake(workdir, config, check=False)
    return workdir, config, first


def _after_the_plan_job(workdir) -> list[str]:
    work = workdir / "work"
    pre = work / "preprocessed" / DATASET
    assert (pre / "nnUNetPlans.json").is_file()
    return sorted(
        str(p.relative_to(work))
        for p in work.rglob("*")
        if p.is_file()
        and not p.is_relative_to(work / "raw")
        and not p.is_relative_to(work / "logs")
    )


@pytest.mark.slow
@pytest.mark.parametrize("when", ["after-the-plan-job", "rerun-dry-run"])
def test_a_configuration_the_plans_lack_stops_at_the_plans(lowres_not_planned, when) -> None:
    workdir, config, first = lowres_not_planned
    planned_only = [
        f"preprocessed/{DATASET}/{name}"
        for name in (
            "dataset.json",
            "dataset_fingerprint.json",
            "nnUNetPlans.json",
            "splits_final.json",
            "verify.json",
        )
    ]
    if when == "after-the-plan-job":
        # the plan job finished; Snakemake stops before any preprocessing (its own trailer lines,
        # "Terminating processes ..." and "At least one job did not complete", follow)
        assert first.returncode == 1, first.stdout + first.stderr
        _assert_one_clear_line(first, NOT_PLANNED)
    else:
        again = snakemake(workdir, config, "-n", check=False)
        assert again.returncode == 2, again.stdout + again.stderr
        _assert_one_clear_line(again, NOT_PLANNED)
        assert "Terminating processes" not in again.stdout + again.stderr
    assert _after_the_plan_job(workdir) == planned_only
