"""benchmarks/speed/realscale/ end to end at toy sizes: docs/benchmarks.md's command (plus the
hidden ``--tiny`` sizes and ``--skip-predict``) beside upstream's peer venv, and ``--dataset`` on a
user's raw dataset without a peer. Real processes, real preprocessing and loaders on both sides."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.peer import HAS_PEER

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"ours_s", "upstream_s", "ratio", "ours_peak_mb", "upstream_peak_mb"}
README_COMMAND = re.compile(r"`(python -m benchmarks\.speed\.realscale [^`]*--quick[^`]*)`")


def run_realscale(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = Path(cwd, argv[argv.index("--out") + 1]).expanduser()
    return done, json.loads(out.read_text())


def assert_measured(entry: dict[str, Any], with_peer: bool) -> None:
    assert REQUIRED <= set(entry)
    assert entry["ours_s"] > 0 and entry["ours_peak_mb"] > 50
    if with_peer:
        assert entry["upstream_s"] > 0 and entry["upstream_peak_mb"] > 50
        assert entry["ratio"] == round(entry["ours_s"] / entry["upstream_s"], 3)
    else:
        assert entry["upstream_s"] is None and entry["ratio"] is None


def test_readme_command_on_a_users_dataset_writes_both_sides_of_every_stage(
    tmp_path, make_raw_dataset
):
    if not HAS_PEER:
        pytest.skip("upstream peer venv (~/.cache/nnunet-peer/venv) is absent")
    match = README_COMMAND.search((REPO / "docs" / "benchmarks.md").read_text())
    assert match, "docs/benchmarks.md shows no `python -m benchmarks.speed.realscale --quick` line"
    raw = make_raw_dataset(tmp_path / "mine" / "Dataset123_Mine", num_training=2, num_test=0)
    before = sorted(p.relative_to(raw) for p in raw.rglob("*"))
    # the docs' addition for your own data, at toy sizes, prediction left to its own tests
    argv = [*shlex.split(match.group(1)), "--dataset", str(raw), "--tiny", "--skip-predict"]
    # the record names the commit the run started with
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    done, record = run_realscale([os.path.expanduser(a) for a in argv], tmp_path)
    assert list(record)[:4] == ["machine", "commit", "dataset", "stages"]
    assert record["commit"].removesuffix("-dirty") == head
    assert record["dataset"] == f"user's raw dataset {raw}" and record["quick"] is True
    stages = record["stages"]
    loaders = sorted(n for n in stages if n.startswith("loader_"))
    assert loaders == ["loader_2d", "loader_3d_fullres"]  # what the plans hold for toy volumes
    for name in ["preprocess", *loaders]:
        assert_measured(stages[name], with_peer=True)
    for name in ("predict_export", "predict_case", "validation_fold"):
        assert stages[name]["note"] == "absent: --skip-predict"
    assert re.search(r"batch \[2, 1, \d+, \d+, \d+\]", stages["loader_3d_fullres"]["note"])
    workers = record["workers_needed"]["stages"]["loader_3d_fullres"]
    assert len(workers["ours"]) == 3 and len(workers["upstream"]) == 3
    assert re.search(r"^loader_3d_fullres\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\d", done.stdout, re.M)
    assert "workers needed to feed a GPU step of 100/200/400 ms" in done.stdout
    assert sorted(p.relative_to(raw) for p in raw.rglob("*")) == before, "the dataset was written"


def test_synthetic_sets_without_a_peer_give_ours_and_name_the_anisotropic_stages(tmp_path):
    argv = ["python", "-m", "benchmarks.speed.realscale", "--tiny", "--skip-predict",
            "--out", "r.json"]  # fmt: skip
    done, record = run_realscale(argv, tmp_path)
    assert "MR-like" in record["dataset"] and "CT-like" in record["dataset"]
    stages = record["stages"]
    for name in ("preprocess", "preprocess_aniso", "loader_3d_fullres", "loader_2d"):
        assert_measured(stages[name], with_peer=False)
    assert_measured(stages["loader_3d_fullres_aniso"], with_peer=False)
    assert "(dummy 2-D augmentation)" in stages["loader_3d_fullres_aniso"]["note"]
    # reduced runs (--quick, --tiny) preprocess the CT-like set's 3d_fullres only, and say so
    assert stages["preprocess_aniso"]["note"].startswith("configurations 3d_fullres (")
    assert record["sizes"]["aniso_configurations"] == ["3d_fullres"]
    assert "dummy" not in stages["loader_3d_fullres"]["note"]
    # toy volumes plan no 3d_lowres: the stage is there, empty, saying why
    assert stages["loader_3d_lowres"]["ours_s"] is None
    assert "not planned" in stages["loader_3d_lowres"]["note"]
    assert record["workers_needed"]["stages"]["loader_2d"]["upstream"] is None
    assert "total" in done.stdout.splitlines()[-2]
