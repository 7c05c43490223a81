"""Through real Snakemake: SIGUSR1 to one fold's training stops it, ``nnunet-core train`` exits
EXIT_STOPPED (its line in the fold's training log), the rule fails, ``retries:`` continues from
the checkpoint, the workflow finishes, the other fold is untouched. The signal also goes to the
rule's shell and to Snakemake itself (as SLURM signals every process of the job step); both
survive because the workflow ignores SIGUSR1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nnunet_core.cluster.stop_signal import EXIT_STOPPED
from tests.helpers.workflow import DATASET, REPO, processes, tiny_config, trainer_of_fold

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]


def test_usr1_stops_one_fold_and_the_retry_continues(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "work")
    config["planning"]["configurations"] = ["3d_fullres"]
    config["training"].update(
        folds=[0, 1], epochs=3, iterations_per_epoch=6, val_iterations_per_epoch=1, retries=1
    )
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [
        str(Path(sys.executable).parent / "snakemake"),
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "--cores",
        "2",
        "trained",
    ]
    out = tmp_path / "snakemake.txt"
    with open(out, "w") as handle:
        run = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=tmp_path)
    log = tmp_path / "work" / "logs" / DATASET / "train_3d_fullres_fold0.log"
    end, trainer = time.time() + 240, None
    while time.time() < end and run.poll() is None:
        if log.is_file() and ": Epoch 1" in log.read_text():
            trainer = trainer_of_fold(DATASET, "0", run.pid)
            if trainer is not None:
                break
        time.sleep(0.05)
    assert trainer is not None, out.read_text()[-3000:]
    shell = processes()[trainer][0]
    for pid in (trainer, shell, run.pid):  # the step's processes (not fold 1's trainer)
        os.kill(pid, signal.SIGUSR1)
    assert run.wait(timeout=300) == 0, out.read_text()[-4000:]
    text = out.read_text()
    assert f"returned non-zero exit status {EXIT_STOPPED}" in text  # the stopped attempt failed
    model = tmp_path / "work" / "results" / DATASET / "nnUNetTrainer__nnUNetPlans__3d_fullres"
    # Snakemake replaces the job log at the retry; the fold's training log of each attempt stays
    first_attempt = sorted((model / "fold_0").glob("training_log_*.txt"))[0].read_text()
    assert (
        f"{DATASET} 3d_fullres fold 0: stopped at epoch 1 by SIGUSR1; "
        "checkpoint_latest.pth holds epoch 2; "
        f"exit {EXIT_STOPPED}: the retry continues with --c"
    ) in first_attempt
    attempts = json.loads((model / "fold_0" / "provenance.json").read_text())["attempts"]
    assert [(a["start_epoch"], a["status"]) for a in attempts] == [(0, "stopped"), (2, "finished")]
    other = json.loads((model / "fold_1" / "provenance.json").read_text())["attempts"]
    assert [(a["start_epoch"], a["status"]) for a in other] == [(0, "finished")]
    for fold in ("fold_0", "fold_1"):
        assert (model / fold / "checkpoint_final.pth").is_file()
        assert (model / fold / "validation" / "summary.json").is_file()
