"""A fold starved of data on purpose: its records say so, and the report's warning fires.

The fold trains through the real CLI with one data worker whose every batch takes
``SLOW_BATCH_S`` longer to build (``$NNUNET_SLOW_BATCH_SECONDS``, the loader's test setting): the
tiny network's CPU step (~0.1 s) then waits most of each iteration for its next batch. What the
trainer measured travels through the log line, the checkpoint's progress record and
``progress.png`` to the report's warning, all real.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import torch

from nnunet_core.model import checkpoint as ckpt
from nnunet_core.report.bottleneck import WAIT_WARNING_SHARE, starved_fold_warnings
from nnunet_core.report.history import history_from_logs, read_fold_history
from tests.helpers.training import CONFIG, DATASET, MODEL, check, cli

pytestmark = pytest.mark.slow

# a batch takes a second longer to build: many times the tiny network's step even on a loaded
# machine, where the step's own time (not waited for) grows
SLOW_BATCH_S = 1.0
# more iterations than the worker prefetches (6) while the previous epoch validates and saves
EPOCHS, ITERATIONS = 2, 8


@pytest.fixture(scope="module")
def starved(env: dict[str, str]) -> Path:
    """Fold 0 trained with slow batches; its folder."""
    start = time.time()
    slow = {**env, "NNUNET_SLOW_BATCH_SECONDS": str(SLOW_BATCH_S)}
    schedule = ["--epochs", str(EPOCHS), "--iterations", str(ITERATIONS), "--val-iterations", "1"]
    check(cli(slow, "train", "900", CONFIG, "0", "-device", "cpu", "--num-workers", "1", *schedule))
    print(f"starved training took {time.time() - start:.1f} s")
    return Path(env["nnUNet_results"]) / DATASET / MODEL / "fold_0"


def test_the_starved_folds_records_show_its_wait(starved: Path) -> None:
    logging = torch.load(starved / ckpt.FINAL, weights_only=True)["logging"]
    waits, computes = logging["data_wait_seconds"], logging["compute_seconds"]
    assert len(waits) == len(computes) == len(logging["train_losses"]) == EPOCHS
    # the first epoch waited for each slow batch, less the steps computed meanwhile (the worker
    # builds the next batch during a step); off CUDA there is no GPU memory
    unhidden = ITERATIONS * SLOW_BATCH_S - computes[0]
    assert waits[0] >= 0.8 * unhidden and all(w > 0 for w in waits), (waits, computes)
    assert all(c > 0 for c in computes) and logging["peak_gpu_memory_mb"] == [None] * EPOCHS
    lines = [
        line
        for log in starved.glob("training_log_*.txt")
        for line in log.read_text().splitlines()
        if ": Data wait: " in line
    ]
    assert len(lines) == EPOCHS and "waiting for data" in lines[0], lines
    parsed = history_from_logs(starved)  # what a fold without checkpoints reports
    assert parsed is not None
    assert parsed["data_wait_seconds"] == pytest.approx(waits, abs=0.01)
    assert (starved / "progress.png").stat().st_size > 10_000


def test_the_report_warns_and_names_the_settings_that_help(starved: Path) -> None:
    history = read_fold_history(starved)
    assert history is not None
    frame, source = history
    assert source == ckpt.FINAL
    curves = frame.assign(model=MODEL, fold=0)
    assert not math.isnan(curves["data_wait_seconds"].iloc[0])
    warnings = starved_fold_warnings(curves)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{MODEL} fold 0 waited for data ")
    share = int(warnings[0].split("waited for data ")[1].split(" %")[0])
    assert share > 100 * WAIT_WARNING_SHARE
    for setting in (
        "training.num_workers",
        "nnUNet_n_proc_DA",
        "training.threads",
        "cpus_per_task",
    ):
        assert setting in warnings[0]
