"""The pure parts of ``benchmarks.speed.predict_many``: its flags, both sides' command lines, the
process-tree measurement, the voxel agreement and the profile's summary (nothing is predicted;
the benchmark itself runs the real sides)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from benchmarks.speed.predict_many import profile, sides
from benchmarks.speed.predict_many.run import FULL, QUICK, parse_args

SETTINGS = {"cases_per_job": 10, "mirroring": False, "step_size": 0.5, "folds": ["0", "1"],
            "cores": 2}  # fmt: skip


def test_quick_and_full_sizes_and_flag_checks(tmp_path: Path) -> None:
    quick = parse_args(["--quick", "--output", str(tmp_path / "r.json")])
    assert (quick.cases, quick.slices, quick.mirroring) == (10, 24, False) == tuple(QUICK.values())
    full = parse_args(["--cases", "3", "--output", str(tmp_path / "r.json")])
    assert (full.cases, full.slices, full.mirroring) == (3, None, FULL["mirroring"])
    assert parse_args(["--quick", "--mirroring"]).mirroring is True
    assert "predict_many_quick_" in parse_args(["--quick"]).output.name
    assert parse_args([]).feature_divisor == 32
    with pytest.raises(SystemExit):
        parse_args(["--feature-divisor", "0"])
    with pytest.raises(SystemExit):
        parse_args(["--dataset", str(tmp_path)])  # without --model
    with pytest.raises(SystemExit):
        parse_args(["--peer", str(tmp_path)])  # no upstream venv there
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nnUNetv2_predict").touch()
    assert parse_args(["--peer", str(tmp_path)]).peer == tmp_path


def test_both_command_lines_carry_the_same_settings(tmp_path: Path) -> None:
    ours = sides.our_command(tmp_path / "m", tmp_path / "i", tmp_path / "o", tmp_path / "w",
                             SETTINGS)  # fmt: skip
    config = ours[ours.index("--config") + 1]
    assert config.startswith("predict={") and "cases_per_job: 10" in config
    assert "use_mirroring: false" in config and "folds: [0, 1]" in config
    assert "step_size: 0.5" in config and "device: cpu" in config
    assert ours[ours.index("--cores") + 1] == "2" and ours[-1] == f"work_dir={tmp_path / 'w'}"
    peer = sides.upstream_command(tmp_path, tmp_path / "m", tmp_path / "i", tmp_path / "o",
                                  SETTINGS)  # fmt: skip
    assert peer[peer.index("-f") + 1 : peer.index("-device")] == ["0", "1"]
    assert "--disable_tta" in peer and "-npp" not in peer  # upstream's defaults otherwise
    mirrored = sides.upstream_command(tmp_path, tmp_path, tmp_path, tmp_path,
                                      {**SETTINGS, "mirroring": True})  # fmt: skip
    assert "--disable_tta" not in mirrored


def test_measure_counts_the_tree_and_its_lifetimes(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\nx = bytearray(60 * 2**20)\n"
            "subprocess.run([sys.executable, '-c', 'y = bytearray(40 * 2**20); "
            "import time; time.sleep(0.8)'])")  # fmt: skip
    measured = sides.measure([sys.executable, "-c", code], sides.clean_env(), tmp_path)
    assert measured.wall_s >= 0.8
    assert measured.peak_rss_mb >= 100  # parent's 60 MB and the child's 40 MB at once
    assert measured.max_processes == 2 and measured.cpu_s > 0
    assert len(measured.lifetimes) == 2 and measured.seconds_of("nothing") is None


def test_agreement_is_the_fraction_of_equal_voxels(tmp_path: Path) -> None:
    for side, flip in (("a", False), ("b", True)):
        array = np.zeros((2, 4, 5), dtype=np.uint8)
        array[0, 0, 0] = 1 if flip else 0
        (tmp_path / side).mkdir()
        sitk.WriteImage(sitk.GetImageFromArray(array), str(tmp_path / side / "c1.nii.gz"))
    found = sides.agreement(tmp_path / "a", tmp_path / "b", ("c1",), ".nii.gz")
    assert found["equal_voxels"] == pytest.approx(39 / 40)
    assert found["per_case"] == {"c1": pytest.approx(39 / 40)}


def test_summary_splits_the_job_process_from_its_workers(tmp_path: Path) -> None:
    rows = [
        ["imports", 10, 0.0, 1.0, ""],
        ["network: sliding window", 10, 2.0, 5.0, "c1", 900],
        ["network: sliding window", 10, 5.0, 5.0, "c2", 800],
        ["preprocess: read, crop, normalize, resample", 11, 1.0, 2.5, "c1", 300],
        ["finish: per case after all predictions", 10, 5.0, 6.0, "c1"],
        ["QC png: read image + output, draw", 10, 5.2, 5.8, "c1"],
        ["shard job (all)", 10, 0.0, 7.0, ""],
    ]
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = profile.summarize(events)
    assert summary["shard_job_s"] == 7.0
    assert summary["main"]["network: sliding window"] == {"s": 3.0, "calls": 2, "rss_mb": 900}
    assert list(summary["workers"]) == ["preprocess: read, crop, normalize, resample"]
    assert summary["main_unaccounted_s"] == 2.0  # 7 - (1 + 3 + 1); the png is inside finish
    assert summary["per_case_s"]["c1"]["QC png: read image + output, draw"] == 0.6


def test_a_call_is_about_its_case() -> None:
    class Case:
        identifier = "ct_001"

    assert profile._case_of((Case(),), {}) == "ct_001"
    assert profile._case_of((object(), "ct_002", "export"), {}) == "ct_002"
    assert profile._case_of((Path("in/ct_003_0000.nii.gz"), Path("qc/ct_003.png")), {}) == "ct_003"


def test_a_process_is_named_by_what_it_runs() -> None:
    class Process:
        def __init__(self, command: list[str], parent: Process | None = None) -> None:
            self.command, self.up = command, parent

        def cmdline(self) -> list[str]:
            return self.command

        def parent(self) -> Process | None:
            return self.up

    shell = Process(["/bin/bash", "-c", "x"])
    job = Process(["/v/bin/python3", "-m", "nnunet_core.new_scans.shard", "r", "s"], shell)
    spawn = ["/v/bin/python3", "-B", "-s", "-c", "from multiprocessing.spawn import spawn_main"]
    assert sides._label(job) == "nnunet_core.new_scans.shard"
    assert sides._label(Process(job.command, job)) == "forked worker"
    assert sides._label(Process(spawn, shell)) == "spawned worker"
    script = ["/v/bin/python3", "/v/bin/nnUNetv2_predict_from_modelfolder", "-m", "model"]
    assert sides._label(Process(script, shell)) == "nnUNetv2_predict_from_modelfolder"


def test_a_failing_sample_is_counted_and_sampling_goes_on(tmp_path: Path, monkeypatch) -> None:
    calls = []
    label = sides._label

    def flaky(process) -> str:
        calls.append(process.pid)
        if len(calls) == 1:
            raise IndexError("list index out of range")  # an empty command line, once
        return label(process)

    monkeypatch.setattr(sides, "_label", flaky)
    code = "x = bytearray(30 * 2**20)\nimport time\ntime.sleep(0.7)"
    measured = sides.measure([sys.executable, "-c", code], sides.clean_env(), tmp_path)
    assert measured.sampling_errors == ["IndexError('list index out of range')"]
    assert measured.peak_rss_mb >= 30 and len(measured.lifetimes) == 1
