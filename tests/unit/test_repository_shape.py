"""The shape of the repository a newcomer reads: short files, and a package whose top level holds
only the entry points (everything else lives in a package named for its concept)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
# records and fixtures are data, not text a person reads top to bottom
DATA_SUFFIXES = {".json", ".csv", ".tsv", ".b2nd", ".npz", ".npy", ".nii", ".gz", ".pth", ".png"}
TOP_LEVEL_MODULES = {"__init__.py", "__main__.py", "cli.py", "errors.py", "train.py"}


def tracked_files() -> list[Path]:
    listing = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / name for name in listing.splitlines()]


def test_no_text_file_is_over_400_lines() -> None:
    too_long = []
    for path in tracked_files():
        if path.suffix in DATA_SUFFIXES or "tests/data" in path.as_posix() or not path.is_file():
            continue
        try:
            lines = path.read_text().count("\n")
        except UnicodeDecodeError:
            continue
        if lines > MAX_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not too_long, "split these files by concern:\n" + "\n".join(too_long)


def test_the_package_top_level_holds_only_entry_points() -> None:
    loose = {p.name for p in (ROOT / "nnunet_core").glob("*.py")} - TOP_LEVEL_MODULES
    assert not loose, f"move these modules into the package of their concept: {sorted(loose)}"


def test_every_slurm_test_is_in_tests_cluster() -> None:
    """``make test``'s SLURM part collects tests/cluster alone: a test marked ``cluster``
    elsewhere would run in neither part."""
    marker = "pytest.mark." + "cluster"
    cluster_folder = ROOT / "tests" / "cluster"
    elsewhere = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "tests").rglob("*.py")
        if cluster_folder not in path.parents and marker in path.read_text()
    ]
    assert elsewhere == [], elsewhere
