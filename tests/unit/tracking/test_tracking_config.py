"""Config ``tracking`` on its way to the fold jobs: the train command's flags, paper mode's tags,
and a back-end whose package is missing: one line naming the extra, before any job (the
workflow's config check) and before anything runs (the train command)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from nnunet_core import cli
from nnunet_core.errors import ConfigurationError
from nnunet_core.tracking import missing_package_line
from nnunet_core.workflow import flags
from nnunet_core.workflow.config import check_config
from nnunet_core.workflow.runs import run_instances

MISSING = (
    "tracking backend wandb: the wandb package is not installed; install the extra: "
    "pip install 'nnunet-core[wandb]' (or make install EXTRAS=wandb)"
)


@pytest.fixture
def without_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    """wandb not importable in this process (None in sys.modules: Python's own marker)."""
    monkeypatch.setitem(sys.modules, "wandb", None)


without_wandb_package = pytest.mark.usefixtures("without_wandb")


def tracking_flags(tracking: dict, work_dir: str = "/w") -> dict[str, list[str]]:
    """The train flags of config ``tracking``, split as the job's shell splits them."""
    words = shlex.split(
        " ".join(flags.tracking_flags({"work_dir": work_dir, "tracking": tracking}))
    )
    parsed: dict[str, list[str]] = {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        parsed.setdefault(flag, []).append(value)
    return parsed


def test_backend_none_passes_no_flags_so_upstreams_switches_still_apply() -> None:
    assert flags.tracking_flags({"work_dir": "w", "tracking": {"backend": "none"}}) == []
    assert flags.tracking_flags({"work_dir": "w"}) == []


def test_mlflow_without_a_uri_is_the_embedded_store_in_the_work_dir() -> None:
    parsed = tracking_flags({"backend": "mlflow", "tags": {"note": "a b"}}, "/runs/w")
    assert parsed == {
        "--tracking": ["mlflow"],
        "--tracking-uri": ["sqlite:////runs/w/mlflow.db"],
        "--tracking-tag": ["note=a b"],
    }


def test_wandb_passes_its_project_and_mode() -> None:
    parsed = tracking_flags({"backend": "wandb", "experiment": "lab", "mode": "offline"})
    assert parsed == {
        "--tracking": ["wandb"],
        "--tracking-experiment": ["lab"],
        "--tracking-mode": ["offline"],
    }


def test_paper_mode_tags_each_run_with_dataset_seed_and_method() -> None:
    config = {
        "work_dir": "w",
        "datasets": [{"id": 901, "name": "Liver", "synthetic": {"enabled": True}}],
        "seeds": [0, 1],
        "tracking": {"backend": "mlflow", "tags": {"lab": "x"}},
        "methods": [
            {"name": "base", "trainer": "nnUNetTrainer", "baseline": True},
            {"name": "nomirror", "trainer": "nnUNetTrainerNoMirroring"},
        ],
    }
    tags = [run.config["tracking"]["tags"] for run in run_instances(config)]
    assert tags == [
        {"lab": "x", "dataset": "Dataset901_Liver", "seed": str(seed), "method": method}
        for seed in (0, 1)
        for method in ("base", "nomirror")
    ]
    assert config["tracking"]["tags"] == {"lab": "x"}  # the shared config is left alone


@without_wandb_package
def test_a_missing_package_names_the_extra() -> None:
    assert missing_package_line("wandb") == MISSING
    assert missing_package_line("none") is None


@without_wandb_package
def test_the_workflow_refuses_a_missing_package_before_any_job(tmp_path: Path) -> None:
    config = {
        "work_dir": str(tmp_path / "work"),
        "dataset": {"id": 900, "name": "Synth", "synthetic": {"enabled": True}},
        "tracking": {"backend": "wandb"},
    }
    with pytest.raises(ConfigurationError) as raised:
        check_config(config)
    assert str(raised.value) == f"config tracking.backend: {MISSING}"


@without_wandb_package
def test_the_train_command_refuses_a_missing_package_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("nnUNet_wandb_enabled", "1")  # upstream's switch, no --tracking
    status = cli.main(["train", "999", "3d_fullres", "0"])  # no such dataset: not reached
    assert status != 0
    assert capsys.readouterr().err.strip().splitlines() == [f"nnunet-core train: error: {MISSING}"]


def test_a_tag_without_a_value_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["train", "999", "3d_fullres", "0", "--tracking-tag", "baseline"]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        "nnunet-core train: error: --tracking-tag baseline: expected KEY=VALUE"
    ]
