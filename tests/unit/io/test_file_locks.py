"""nnunet_core.io.locks with real processes: a held lock refuses a second process, names its
holder, and is gone the moment the holder dies (SIGKILL included), so it can never go stale."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from nnunet_core.io.locks import held, open_lock_file, read_holder, try_lock, write_holder

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

# A holder process: takes the lock, says who it is, prints "held", then waits to be killed (or
# exits after `seconds`).
HOLDER = """
import os, sys, time
from nnunet_core.io.locks import open_lock_file, try_lock, write_holder
handle = open_lock_file(sys.argv[1])
if not try_lock(handle, shared=sys.argv[2] == "shared"):
    print("refused", flush=True)
    sys.exit(3)
write_holder(handle, f"pid {os.getpid()}")
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


@contextmanager
def holder(path: Path, *, shared: bool = False, seconds: float = 60) -> Iterator[subprocess.Popen]:
    """A process holding the lock of ``path`` until the block ends (killed then)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            str(path),
            "shared" if shared else "exclusive",
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait(timeout=30)


def test_a_second_process_is_refused_and_learns_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "fold.lock"
    with holder(path) as process:
        with open_lock_file(path) as handle:
            assert not try_lock(handle)
            assert read_holder(handle) == f"pid {process.pid}"


def test_the_lock_is_free_once_its_holder_is_killed(tmp_path: Path) -> None:
    path = tmp_path / "fold.lock"
    with holder(path) as process:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        with open_lock_file(path) as handle:
            assert try_lock(handle)  # the file is still there; the lock is not
            assert path.is_file()


def test_shared_holders_coexist_but_keep_an_exclusive_one_out(tmp_path: Path) -> None:
    path = tmp_path / "gpu_0.lock"
    with holder(path, shared=True), open_lock_file(path) as handle:
        assert try_lock(handle, shared=True)
        with open_lock_file(path) as other:
            assert not try_lock(other)


def test_an_exclusive_holder_keeps_a_shared_one_out(tmp_path: Path) -> None:
    path = tmp_path / "gpu_0.lock"
    with holder(path), open_lock_file(path) as handle:
        assert not try_lock(handle, shared=True)


def test_held_waits_for_the_holder_to_end(tmp_path: Path) -> None:
    path = tmp_path / "mutex"
    with holder(path, seconds=1.0) as process:
        start = time.monotonic()
        with held(path) as handle:
            waited = time.monotonic() - start
            write_holder(handle, "me")
        assert waited > 0.5  # the holder sleeps 1 s after taking the lock
        assert process.wait(timeout=30) == 0  # it ended on its own: the lock went with it
    assert path.read_text() == "me\n"


def test_a_lock_is_released_when_its_file_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "fold.lock"
    first = open_lock_file(path)
    assert try_lock(first)
    with open_lock_file(path) as second:
        assert not try_lock(second)  # a second open file of this process is refused too
        first.close()
        assert try_lock(second)


def test_a_new_lock_file_is_private_and_an_existing_one_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "gpu_1.lock"
    with open_lock_file(path):
        assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o640)
    with open_lock_file(path) as handle:
        write_holder(handle, "me")
    assert path.stat().st_mode & 0o777 == 0o640  # never chmod-ed
