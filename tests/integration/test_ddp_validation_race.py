"""The final validation under DDP: rank 0's cleanup of ``validation/`` never races another rank's
export (issue 14: rank 0 deleted rank 1's temporary file, rank 1 died in ``atomic_path``).

Two real gloo ranks (``distributed.spawn``) run ``fold.run.validate`` on the tiny dataset's fold 0
(two validation cases, one per rank). The race is forced, not left to chance:

- rank 1 holds its export open once the temporary file is written, until rank 0's cleanup is done;
- rank 0 starts its cleanup only once rank 1 holds such a file, or once rank 1 waits in a barrier
  (then it cannot be writing).

Without a barrier between the cleanup and the exports, rank 0 deletes the temporary file every
time and rank 1 fails with FileNotFoundError; with it, rank 1 writes only after the cleanup.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import traceback
from pathlib import Path

import pytest
import torch

from nnunet_core.layout.roots import Roots
from tests.helpers.training import CONFIG, DATASET

pytestmark = pytest.mark.slow

WAIT_S = 60.0  # a hook's longest wait for the other rank (the run fails or passes long before)
RANK1_WROTE = "rank1_holds_a_temporary_file"
RANK1_IN_BARRIER = "rank1_waits_in_a_barrier"
CLEANED = "rank0_cleaned"


def _wait_for(markers: Path, *names: str) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        for name in names:
            if (markers / name).exists():
                return name
        time.sleep(0.02)
    return "timeout"


def _slow_cleanup_on_rank0(markers: Path) -> None:
    from nnunet_core.training.fold import validation

    original = validation.remove_stale_predictions

    def remove_stale_predictions(folder, keep, file_ending):
        released_by = _wait_for(markers, RANK1_WROTE, RANK1_IN_BARRIER)
        (markers / "rank0_released_by").write_text(released_by)
        removed = original(folder, keep, file_ending)
        (markers / CLEANED).touch()
        return removed

    validation.remove_stale_predictions = remove_stale_predictions


def _held_export_on_rank1(markers: Path, validation_folder: Path) -> None:
    import torch.distributed as dist

    from nnunet_core.io.readers import base

    original_path = base.atomic_path
    original_barrier = dist.barrier

    @contextlib.contextmanager
    def atomic_path(target, suffix=""):
        with original_path(target, suffix) as tmp:
            yield tmp
            if Path(target).parent == validation_folder:  # the temporary file is written now
                (markers / RANK1_WROTE).write_text(tmp.name)
                _wait_for(markers, CLEANED)

    def barrier(*args, **kwargs):
        (markers / RANK1_IN_BARRIER).touch()
        return original_barrier(*args, **kwargs)

    base.atomic_path = atomic_path
    dist.barrier = barrier


def _validate_on_rank(setup, markers: str) -> None:
    from nnunet_core import Trainer, TrainerSettings
    from nnunet_core.layout.results import VALIDATION_FOLDER
    from nnunet_core.training.distributed import process_group
    from nnunet_core.training.fold.run import FoldFlags, validate, write_summary

    torch.set_num_threads(1)
    with process_group(torch.device("cpu")) as (topology, device):
        try:
            if topology.is_main:
                _slow_cleanup_on_rank0(Path(markers))
            else:
                _held_export_on_rank1(Path(markers), setup.output_folder / VALIDATION_FOLDER)
            settings = TrainerSettings(num_epochs=1, num_workers=0, is_main=topology.is_main)
            trainer = Trainer(setup, settings, device, topology)
            write_summary(trainer, validate(trainer, FoldFlags()))
        except BaseException:
            Path(markers, f"rank{topology.global_rank}.error").write_text(traceback.format_exc())
            raise


def test_rank0_cleanup_never_deletes_a_file_another_rank_is_writing(
    env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nnunet_core.layout.results import SUMMARY_JSON, VALIDATION_FOLDER
    from nnunet_core.training.distributed import find_free_port, spawn
    from nnunet_core.training.fold.setup import prepare_fold

    roots = Roots.from_env(env["nnUNet_raw"], env["nnUNet_preprocessed"], env["nnUNet_results"])
    setup = prepare_fold(roots, DATASET, CONFIG, 0, "nnUNetPlans", "nnUNetTrainer")
    setup = dataclasses.replace(setup, output_folder=tmp_path / "fold_0")
    assert len(setup.val_keys) == 2, setup.val_keys  # one case per rank
    ending = setup.dataset_json["file_ending"]
    validation = setup.output_folder / VALIDATION_FOLDER
    validation.mkdir(parents=True)
    # an earlier run's leftovers: a case no longer validated here and a killed write's temporary
    stale = [
        validation / f"gone_case{ending}",
        validation / f".{setup.val_keys[1]}{ending}.old{ending}",
    ]
    for path in stale:
        path.write_bytes(b"stale")
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    monkeypatch.setenv("MASTER_PORT", str(find_free_port()))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")

    start = time.monotonic()
    code = spawn(2, _validate_on_rank, setup, str(markers))
    seconds = time.monotonic() - start
    errors = "\n".join(p.read_text() for p in sorted(markers.glob("rank*.error")))
    released = markers / "rank0_released_by"
    print(f"2 ranks validated in {seconds:.1f} s; rank 0's cleanup released by "
          f"{released.read_text() if released.exists() else '?'}")  # fmt: skip
    assert code == 0 and not errors, f"exit code {code}\n{errors}"
    names = sorted(p.name for p in validation.iterdir())
    assert names == sorted([*(f"{k}{ending}" for k in setup.val_keys), SUMMARY_JSON]), names
    assert not any(path.exists() for path in stale)
