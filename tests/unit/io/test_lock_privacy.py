"""Lock files and the GPU lock folder are private (issue 51 part 4), probed with real files, real
links and real processes: a planted symbolic link, hard link, FIFO or someone else's file at a
lock path is refused in one line and left exactly as it was; a lock folder that is a link, not
ours, or writable by others is refused before anything is written in it; the default folder is
per user and created 0700, and it still coordinates the slots of that user's processes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nnunet_core.cluster import gpu_slots
from nnunet_core.cluster.gpu_slots import acquire_gpus, release_all
from nnunet_core.errors import ConfigurationError
from nnunet_core.io.locks import UnsafeLockError, open_lock_file, write_holder
from nnunet_core.layout.work import work_lock_file
from nnunet_core.training.fold.lock import FoldLock
from nnunet_core.workflow import work_lock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners, modes and links")

SECRET = "the user's own notes\n"
ONE_GPU = {"nnUNet_num_gpus": "1"}


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A private file of the user that a planted link points at."""
    path = tmp_path / "victim.txt"
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


@pytest.fixture
def lock_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture(autouse=True)
def _release_slots():
    yield
    release_all()


def assert_untouched(victim: Path) -> None:
    assert victim.read_text() == SECRET
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600


def assert_one_line(exc: pytest.ExceptionInfo, *parts: str) -> None:
    text = str(exc.value)
    assert "\n" not in text
    for part in parts:
        assert part in text


def someone_elses(path: Path) -> None:
    """Give ``path`` to another user (nobody); only root can, so others skip the case."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(path, 65534, 65534, follow_symlinks=False)


# ------------------------------------------------------------------ the probe of the issue
@pytest.mark.parametrize("folds_per_gpu", [1, 2])
def test_a_gpu_lock_linked_to_a_private_file_is_refused_and_the_file_untouched(
    lock_dir: Path, victim: Path, folds_per_gpu: int
) -> None:
    link = lock_dir / "gpu_0.lock"
    link.symlink_to(victim)
    with pytest.raises(UnsafeLockError) as refused:
        acquire_gpus(1, lock_dir, environ=dict(ONE_GPU), folds_per_gpu=folds_per_gpu, timeout=5)
    assert_one_line(refused, f"lock file {link} is a symbolic link")
    assert_untouched(victim)
    assert link.is_symlink()  # left as it was, for the user to look at


@pytest.mark.parametrize("name", ["gpu_0.0.lock", gpu_slots.MUTEX_NAME])
def test_a_linked_share_file_or_mutex_is_refused(lock_dir: Path, victim: Path, name: str) -> None:
    (lock_dir / name).symlink_to(victim)
    with pytest.raises(UnsafeLockError, match=f"lock file {lock_dir / name} is a symbolic link"):
        acquire_gpus(1, lock_dir, environ=dict(ONE_GPU), folds_per_gpu=2, timeout=5)
    assert_untouched(victim)


def test_the_train_command_refuses_a_linked_gpu_lock_in_one_line(
    lock_dir: Path, victim: Path
) -> None:
    """The real CLI in its own process: exit 2, one line naming the link, the victim intact."""
    (lock_dir / "gpu_0.lock").symlink_to(victim)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    result = subprocess.run(
        [sys.executable, "-m", "nnunet_core", "train", "1", "3d_fullres", "0"]
        + ["--gpu-lock-dir", str(lock_dir)],
        env={**env, **ONE_GPU},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"nnunet-core train: error: lock file {lock_dir / 'gpu_0.lock'} is a symbolic link: "
        "refused and left untouched (a lock file is never followed through a link, nor written "
        "unless it is a plain file of yours); remove it or use another folder, then run again"
    ]
    assert_untouched(victim)


# ------------------------------------------------------------------ the fold and work_dir locks
def test_a_linked_fold_lock_is_refused(tmp_path: Path, victim: Path) -> None:
    fold = tmp_path / "fold_0"
    fold.mkdir()
    lock = FoldLock(fold)
    lock.path.symlink_to(victim)
    with pytest.raises(UnsafeLockError) as refused:
        lock.acquire()
    assert_one_line(refused, f"lock file {lock.path} is a symbolic link")
    assert_untouched(victim)


def test_a_linked_work_dir_lock_is_refused(tmp_path: Path, victim: Path) -> None:
    work = tmp_path / "work"
    path = work_lock_file(work)
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    with pytest.raises(UnsafeLockError) as refused:
        work_lock.acquire(work)
    assert_one_line(refused, f"lock file {path} is a symbolic link")
    assert_untouched(victim)


# ------------------------------------------------------------------ files we did not create
def test_a_hard_link_to_a_private_file_is_never_written(lock_dir: Path, victim: Path) -> None:
    os.link(victim, lock_dir / "gpu_0.lock")
    with pytest.raises(UnsafeLockError, match="gpu_0.lock has 2 hard links"):
        acquire_gpus(1, lock_dir, environ=dict(ONE_GPU), timeout=5)
    assert_untouched(victim)


def test_a_fifo_at_a_lock_path_is_refused_without_hanging(tmp_path: Path) -> None:
    fold = tmp_path / "fold_0"
    fold.mkdir()
    lock = FoldLock(fold)
    os.mkfifo(lock.path)
    with pytest.raises(UnsafeLockError, match="is a FIFO, not a regular file"):
        lock.acquire()


def test_someone_elses_lock_file_is_refused_and_not_truncated(lock_dir: Path) -> None:
    path = lock_dir / "gpu_0.lock"
    path.write_text("pid 1 folds_per_gpu=1\n")
    someone_elses(path)
    with pytest.raises(UnsafeLockError) as refused:
        acquire_gpus(1, lock_dir, environ=dict(ONE_GPU), timeout=5)
    assert_one_line(refused, f"lock file {path} belongs to uid 65534, not to you")
    assert path.read_text() == "pid 1 folds_per_gpu=1\n"


def test_write_holder_never_truncates_a_file_that_gained_a_second_name(tmp_path: Path) -> None:
    path = tmp_path / "fold.lock"
    with open_lock_file(path) as handle:
        write_holder(handle, "pid 1")
        os.link(path, tmp_path / "other-name")
        with pytest.raises(UnsafeLockError, match="has 2 hard links"):
            write_holder(handle, "pid 2")
    assert path.read_text() == "pid 1\n"


# ------------------------------------------------------------------ the lock folder
def test_a_folder_writable_by_others_is_refused_and_left_empty(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)  # what a shared /tmp/nnunet_core_gpu_locks looked like
    with pytest.raises(UnsafeLockError) as refused:
        acquire_gpus(1, folder, environ=dict(ONE_GPU), timeout=5)
    assert_one_line(
        refused,
        f"GPU lock folder {folder} is writable by group and others (mode 777)",
        "--gpu-lock-dir",
    )
    assert list(folder.iterdir()) == []
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777  # never chmod-ed


def test_a_folder_writable_by_its_group_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "group"
    folder.mkdir()
    folder.chmod(0o770)
    with pytest.raises(UnsafeLockError, match="is writable by group \\(mode 770\\)"):
        acquire_gpus(1, folder, environ=dict(ONE_GPU), timeout=5)


def test_a_folder_read_by_others_but_written_only_by_us_is_fine(tmp_path: Path) -> None:
    folder = tmp_path / "readable"
    folder.mkdir()
    folder.chmod(0o755)
    assert acquire_gpus(1, folder, environ=dict(ONE_GPU), timeout=5) == [0]


def test_a_linked_folder_is_refused_even_to_a_private_folder_of_ours(
    tmp_path: Path, lock_dir: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(lock_dir, target_is_directory=True)
    with pytest.raises(UnsafeLockError) as refused:
        acquire_gpus(1, link, environ=dict(ONE_GPU), timeout=5)
    assert_one_line(refused, f"GPU lock folder {link} is a symbolic link, not a real folder")
    assert list(lock_dir.iterdir()) == []


def test_a_file_named_as_the_folder_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "locks"
    path.write_text("x")
    with pytest.raises(UnsafeLockError, match=f"{path} is a regular file, not a real folder"):
        acquire_gpus(1, path, environ=dict(ONE_GPU), timeout=5)
    assert path.read_text() == "x"


def test_someone_elses_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    someone_elses(folder)
    with pytest.raises(UnsafeLockError) as refused:
        acquire_gpus(1, folder, environ=dict(ONE_GPU), timeout=5)
    assert_one_line(refused, f"GPU lock folder {folder} belongs to uid 65534, not to you")
    assert list(folder.iterdir()) == []


# ------------------------------------------------------------------ the default folder
@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder of this process (and of its children: ``TMPDIR``) moved here."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def test_the_default_folder_is_per_user_and_created_0700(temp_root: Path) -> None:
    expected = temp_root / f"nnunet_core_gpu_locks-{os.getuid()}"
    assert gpu_slots.default_lock_dir({}) == expected
    assert acquire_gpus(1, environ=dict(ONE_GPU), timeout=5) == [0]
    assert stat.S_IMODE(expected.lstat().st_mode) == 0o700
    assert stat.S_IMODE((expected / "gpu_0.lock").lstat().st_mode) == 0o600


def test_a_default_folder_planted_open_by_someone_is_refused(temp_root: Path) -> None:
    planted = temp_root / f"nnunet_core_gpu_locks-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    with pytest.raises(UnsafeLockError, match=f"GPU lock folder {planted} is writable by"):
        acquire_gpus(1, environ=dict(ONE_GPU), timeout=5)


HOLDER = """
import sys
from nnunet_core.cluster.gpu_slots import acquire_gpus
print(acquire_gpus(1, poll_seconds=0.05), flush=True)
sys.stdin.read()  # hold the slot until the test closes stdin
"""


def test_the_default_folder_still_coordinates_one_users_processes(temp_root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "TMPDIR")}
    env.pop(gpu_slots.LOCK_DIR_ENV, None)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        env={**env, **ONE_GPU, "TMPDIR": str(temp_root)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "[0]"
        with pytest.raises(ConfigurationError, match="no 1 free GPU slot"):
            acquire_gpus(1, environ=dict(ONE_GPU), poll_seconds=0.05, timeout=0.3)
        holder.stdin.close()
        assert holder.wait(30) == 0
        assert acquire_gpus(1, environ=dict(ONE_GPU), poll_seconds=0.05, timeout=10) == [0]
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(30)
