"""nnunet_core.io.removal: deletion only strictly inside the folders named (issue 51).

Real files, folders and symlinks under tmp_path; ``$HOME`` points into tmp_path where the home
folder matters, so nothing outside the test's folder can be touched even if a check failed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nnunet_core.errors import ConfigurationError
from nnunet_core.io.removal import confined_path, remove_file, remove_tree


def _tree(folder: Path) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file.txt").write_text("data")
    return folder


def _refused(path: Path, inside: list[Path], *words: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        remove_tree(path, inside=inside)
    line = str(caught.value)
    assert "\n" not in line and str(path) in line, line
    for word in words:
        assert word in line, line
    return line


def test_a_folder_inside_is_removed(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _tree(root / "stage.partial")
    assert remove_tree(root / "stage.partial", inside=[root]) is True
    assert not (root / "stage.partial").exists() and root.is_dir()
    assert remove_tree(root / "stage.partial", inside=[root]) is False  # already gone


def test_the_file_system_root_is_refused(tmp_path: Path) -> None:
    _refused(Path("/"), [tmp_path], "the file system's root")
    _refused(Path("/"), [Path("/")])
    _refused(Path("/etc"), [Path("/")], "not inside the run's folders")  # / is never a root
    assert Path("/etc").is_dir()


def test_the_home_folder_and_above_are_refused(tmp_path: Path, monkeypatch) -> None:
    home = _tree(tmp_path / "users" / "me")
    monkeypatch.setenv("HOME", str(home))
    _refused(home, [tmp_path / "users"], "the home folder")
    _refused(tmp_path / "users", [tmp_path], "the home folder")  # a folder above it
    _refused(home / "sub", [home], "not inside the run's folders")  # home is never a root
    assert (home / "sub" / "file.txt").read_text() == "data"
    assert remove_tree(home / "sub" / "file.txt", inside=[home / "sub"]) is True


def test_the_root_itself_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "run")
    _refused(root, [root], "not inside")
    _refused(root / ".", [root], "not inside")
    assert (root / "sub" / "file.txt").is_file()


def test_a_sibling_sharing_a_name_prefix_is_refused(tmp_path: Path) -> None:
    """The issue's `rm -rf /tmp/x/wd mv/...`: `/x/wd` is no folder of `/x/wd mv`, nor the
    reverse."""
    short, spaced = _tree(tmp_path / "wd"), _tree(tmp_path / "wd mv")
    _refused(short, [spaced], "not inside")
    _refused(short / "sub", [spaced], "not inside")
    _refused(spaced / "sub", [short], "not inside")
    assert (short / "sub" / "file.txt").is_file() and (spaced / "sub" / "file.txt").is_file()
    assert remove_tree(spaced / "sub", inside=[spaced]) is True
    assert (short / "sub" / "file.txt").is_file()


def test_a_path_through_a_symlinked_parent_that_leaves_the_root_is_refused(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "run", _tree(tmp_path / "outside")
    root.mkdir()
    (root / "escape").symlink_to(outside)
    _refused(root / "escape" / "sub", [root], str(tmp_path / "outside"))
    _refused(root / "../outside/sub", [root], "not inside")
    assert (outside / "sub" / "file.txt").read_text() == "data"


def test_a_symlink_inside_is_unlinked_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "run", _tree(tmp_path / "outside")
    root.mkdir()
    (root / "to_folder").symlink_to(outside / "sub", target_is_directory=True)
    (root / "to_file").symlink_to(outside / "sub" / "file.txt")
    assert remove_tree(root / "to_folder", inside=[root]) is True
    assert remove_file(root / "to_file", inside=[root]) is True
    assert not (root / "to_folder").is_symlink() and not (root / "to_file").is_symlink()
    assert (outside / "sub" / "file.txt").read_text() == "data"


def test_the_root_reached_through_a_symlink_counts_as_itself(tmp_path: Path) -> None:
    real = _tree(tmp_path / "real")
    (tmp_path / "alias").symlink_to(real)
    assert confined_path(tmp_path / "alias" / "sub", [real]) == real / "sub"
    assert remove_tree(real / "sub", inside=[tmp_path / "alias"]) is True
    assert not (real / "sub").exists()


def test_remove_file_refuses_a_folder_and_skips_a_missing_file(tmp_path: Path) -> None:
    root = _tree(tmp_path / "run")
    with pytest.raises(ConfigurationError, match="is a folder, not a file"):
        remove_file(root / "sub", inside=[root])
    assert remove_file(root / "sub" / "gone.txt", inside=[root]) is False
    assert (root / "sub" / "file.txt").is_file()


def test_no_folder_named_is_refused(tmp_path: Path) -> None:
    _refused(_tree(tmp_path / "run") / "sub", [], "no folder of the run")


def test_the_command_line_refuses_in_one_line_and_deletes_nothing(tmp_path: Path) -> None:
    root, other = _tree(tmp_path / "wd mv"), _tree(tmp_path / "wd")
    command = [sys.executable, "-m", "nnunet_core.io.removal", "--inside", str(root)]
    result = subprocess.run([*command, str(other)], capture_output=True, text=True)
    assert result.returncode != 0
    assert result.stderr.count("\n") == 1 and str(other) in result.stderr, result.stderr
    assert (other / "sub" / "file.txt").is_file()
    done = subprocess.run([*command, str(root / "sub"), str(root / "missing")], check=True)
    assert done.returncode == 0 and not (root / "sub").exists() and root.is_dir()
