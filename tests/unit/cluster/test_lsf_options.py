"""The bsub options the train and predict rules give the LSF plugin (nnunet_core.cluster.lsf).

The plugin maps no GPU resource, so these strings are the only GPU request of an LSF job; a wrong
count starts DDP on fewer GPUs than it spawns processes for, found only after a queue wait.
tests/unit/cluster/test_lsf_profile.py checks the bsub line the plugin builds from them.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nnunet_core.cluster import lsf, stop_signal


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_fold_jobs_ask_for_their_gpus_and_the_warning_signal(gpus) -> None:
    assert lsf.bsub_extra(gpus, "USR1") == f"-gpu num={gpus} -wa USR1 -wt 10"


def test_the_configured_signal_and_lead_time_are_used() -> None:
    assert lsf.bsub_extra(1, "USR2") == "-gpu num=1 -wa USR2 -wt 10"
    assert lsf.bsub_extra(2, "USR1", warning_minutes=30) == "-gpu num=2 -wa USR1 -wt 30"


def test_prediction_jobs_ask_for_gpus_only() -> None:
    assert lsf.bsub_extra(1) == "-gpu num=1"
    assert lsf.bsub_extra(4) == "-gpu num=4"


def test_cpu_jobs_ask_for_no_gpu() -> None:
    assert lsf.bsub_extra(0, "USR1") == "-wa USR1 -wt 10"
    assert lsf.bsub_extra(0) == ""


@pytest.mark.parametrize("executor", ["slurm", "local", "dryrun", None])
def test_other_executors_get_no_lsf_resource(executor) -> None:
    """A SLURM (or local, or dry) run shows no LSF key (issue 36); None is no resource."""
    assert lsf.bsub_extra_for_executor(executor, 1, "USR1") is None


def test_the_lsf_executor_gets_the_options() -> None:
    assert lsf.bsub_extra_for_executor("lsf", 2, "USR1") == "-gpu num=2 -wa USR1 -wt 10"
    assert lsf.bsub_extra_for_executor("lsf", 1) == "-gpu num=1"


def test_a_rules_bsub_extra_follows_the_executor_and_the_configured_signal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workflow = SimpleNamespace(executor_plugin=None)  # what Snakemake's object carries
    monkeypatch.setenv(stop_signal.ENV_VAR, "USR2")
    train = lsf.rule_lsf_extra(workflow, 2, resumable=True)
    monkeypatch.setenv(stop_signal.ENV_VAR, "USR1")  # read when the rule is built, not later
    assert train({}) is None  # a dry run: no executor yet
    workflow.executor_plugin = SimpleNamespace(name="slurm")
    assert train({}) is None
    workflow.executor_plugin = SimpleNamespace(name="lsf")
    assert train({}) == "-gpu num=2 -wa USR2 -wt 10"
    assert lsf.rule_lsf_extra(workflow, 1, resumable=False)({}) == "-gpu num=1"
