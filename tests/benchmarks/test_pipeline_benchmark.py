"""The pure parts of benchmarks/speed/pipeline/: stage names, interval unions, the ratio table,
fold log phases, and the /proc monitor on a real two-process tree (seconds, no training)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.speed.pipeline.monitor import MB, TreeSampler, run_parallel
from benchmarks.speed.pipeline.stages import (
    fold_log_phases,
    format_table,
    ours_stage,
    ratio_rows,
    union_seconds,
    upstream_stage,
)
from benchmarks.speed.pipeline.upstream import Schedule, install_trainer

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.mark.parametrize(
    ("argv", "stage"),
    [
        (["/bin/bash", "-c", "set -euo pipefail; nnunet-core verify -d D"], "plan_preprocess"),
        (["/bin/bash", "-c", "OMP_NUM_THREADS=1 nnunet-core train D 2d 0 --c"], "training"),
        (["python", "-m", "nnunet_core", "ensemble-cv", "-d", "D"], "selection"),
        (["/bin/bash", "-c", "rm -rf x.partial\nnnunet-core predict -i a -o b"], "prediction"),
        (["/bin/bash", "-c", "nnunet-core ensemble -i a b -o c"], "ensembling"),
        (["/bin/bash", "-c", "nnunet-core apply-postprocessing -i a"], "postprocessing"),
        (["/bin/bash", "-c", "nnunet-core evaluate a b -djfile c"], "evaluation"),
        (["/bin/bash", "-c", "nnunet-core report -d D"], "report"),
        (["/bin/bash", "-c", "echo hello"], "other"),
    ],
)
def test_ours_stage_from_the_job_shell(argv, stage):
    assert ours_stage(argv) == stage


def test_upstream_stage_from_the_console_script():
    assert upstream_stage(["/v/bin/python", "/v/bin/nnUNetv2_train", "900", "2d", "0"]) == (
        "training"
    )
    assert upstream_stage(["/v/bin/nnUNetv2_find_best_configuration", "900"]) == "selection"
    assert upstream_stage(["/v/bin/nnUNetv2_evaluate_folder", "a", "b"]) == "evaluation"
    assert upstream_stage(["python", "-c", "from multiprocessing.spawn import x"]) == "other"


def test_union_of_overlapping_intervals():
    # two parallel folds (0-10, 2-12), a gap, then one job (20-25)
    assert union_seconds([(20, 25), (0, 10), (2, 12)]) == 17
    assert union_seconds([]) == 0


def test_ratio_rows_in_upstream_order_with_ours_only_stages_and_total_last():
    ours = {
        "total": {"wall_s": 50.0, "cpu_s": 60.0, "peak_mb": 900.0},
        "report": {"wall_s": 5.0, "cpu_s": 4.0, "peak_mb": 300.0},
        "training": {"wall_s": 30.0, "cpu_s": 50.0, "peak_mb": 800.0},
    }
    upstream = {
        "training": {"wall_s": 60.0, "cpu_s": 100.0, "peak_mb": 1600.0},
        "total": {"wall_s": 100.0, "cpu_s": 120.0, "peak_mb": 1800.0},
    }
    rows = ratio_rows(ours, upstream)
    assert [r["stage"] for r in rows] == ["training", "report", "total"]
    assert rows[0]["ratio_wall_s"] == 0.5 and rows[0]["ratio_peak_mb"] == 0.5
    assert rows[1]["upstream_wall_s"] is None and rows[1]["ratio_wall_s"] is None
    table = format_table(rows)
    assert "training" in table.splitlines()[2] and "0.50" in table.splitlines()[2]
    assert table.splitlines()[3].split()[2:4] == ["-", "-"]


OURS_LOG = """\
2026-12-03 19:01:41: nnUNetTrainer 2d fold 0 on cpu: 4 training / 2 validation cases
2026-12-03 19:01:43: epoch 2/2: 0.27 s; all epochs done
2026-12-03 19:01:45: training finished after 2 epochs
evaluate: case 1/2 (synth_003) 0.0 s; ETA 0:00:00
2026-12-03 19:01:49: Mean Validation Dice: 0.17786876119073664
"""
UPSTREAM_LOG = """\
####
2026-12-03 19:13:35.447550: do_dummy_2d_data_aug: False
2026-12-03 19:13:41.748820: Training done.
2026-12-03 19:13:41.839861: predicting synth_003
2026-12-03 19:21:28.656467: Mean Validation Dice:  0.27648399769301146
"""


def test_fold_log_phases_ours_and_upstream():
    ours = fold_log_phases(OURS_LOG)
    assert (ours["training_s"], ours["validation_s"]) == (4.0, 4.0)
    upstream = fold_log_phases(UPSTREAM_LOG)
    assert upstream["training_s"] == pytest.approx(6.30127)
    assert upstream["validation_s"] == pytest.approx(466.907647)
    assert fold_log_phases("2026-12-03 19:01:41: started\n") is None


def test_trainer_written_into_a_fake_peer_venv(tmp_path):
    package = tmp_path / "lib/python3.11/site-packages/nnunetv2/training/nnUNetTrainer"
    package.mkdir(parents=True)
    written = install_trainer(tmp_path, Schedule(5, 20, 5))
    assert written == package / "nnUNetTrainer_Bench5x20v5.py"
    source = written.read_text()
    assert "class nnUNetTrainer_Bench5x20v5(nnUNetTrainer)" in source
    assert "self.num_epochs = 5" in source and "num_val_iterations_per_epoch = 5" in source
    compile(source, str(written), "exec")


# A parent that starts one child holding ~200 MB and burning CPU, then both exit.
TREE = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", '''
    import time
    block = bytearray(200 * 2**20)
    end = time.process_time() + 0.6
    while time.process_time() < end:
        pass
    time.sleep(0.4)
    '''])
    child.wait()
    """
)


def test_monitor_sees_the_child_memory_and_cpu(tmp_path):
    label = lambda argv: "tree" if "subprocess" in " ".join(argv) else "other"  # noqa: E731
    with TreeSampler(os.getpid(), job_depth=1, label=label, interval=0.05) as sampler:
        result = run_parallel([[sys.executable, "-c", TREE]], 1, tmp_path, sampler=sampler)
    assert result.returncodes == [0]
    # the child's 200 MB counted (the interpreters add some tens of MB)
    assert 200 <= result.peak_rss_mb < 400
    assert sampler.peak_rss("tree") / MB >= 200
    # exact CPU of the whole command from rusage: the child's 0.6 s burn and start-up
    assert 0.6 <= result.cpu_s < 3
    (job,) = [j for j in sampler.jobs.values() if j.label == "tree"]
    assert 0.6 <= job.cpu < 3
    assert job.end - job.start >= 0.8


def test_small_jobs_import_neither_torch_nor_skimage():
    """Ensembling, postprocessing, evaluation and the dataset checks run as separate jobs, each
    paying its imports: torch (~2 s CPU) and skimage (~0.3 s) load only where they are used."""
    import subprocess

    code = (
        "import sys, nnunet_core.inference.export, nnunet_core.evaluation.ensemble, "
        "nnunet_core.dataset.discovery, nnunet_core.io.readers.registry; "
        "print(sorted({'torch', 'skimage', 'tifffile'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
