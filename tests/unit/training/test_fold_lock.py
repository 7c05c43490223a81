"""The fold lock: one training per fold folder, released by the kernel when its holder ends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nnunet_core.training.fold.lock import FoldLock, FoldLockedError


def test_fold_lock_refuses_a_second_holder_and_frees_on_release(tmp_path) -> None:
    first = FoldLock(tmp_path / "fold_0")
    first.acquire()
    with pytest.raises(FoldLockedError, match=f"already being trained by pid {os.getpid()}"):
        FoldLock(tmp_path / "fold_0").acquire()
    first.release()
    with FoldLock(tmp_path / "fold_0"):
        pass


def test_fold_lock_is_released_when_the_holder_is_killed(tmp_path) -> None:
    code = (
        "import sys, time; from nnunet_core.training.fold.lock import FoldLock; "
        f"lock = FoldLock({str(tmp_path)!r}); lock.acquire(); "
        "print('locked', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(FoldLockedError, match=f"pid {holder.pid}"):
            FoldLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with FoldLock(tmp_path):
        pass
