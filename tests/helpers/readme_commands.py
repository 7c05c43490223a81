"""The shell commands README.md and the docs pages (docs/**/*.md) show, and a checkout in which
to run them.

A command is a line of a ```bash block (a trailing "  # comment" is dropped). The tests run each
one as printed from a folder that looks like a fresh checkout (`mirror_checkout`): the tracked
top-level entries and `.venv` linked in, so `.venv/bin/snakemake`, `config/config.yaml` and
`profiles/slurm` resolve as in the repository, while what the commands write stays in that folder.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

DEMO = "make demo"
DEMO_TARGETS_FIRST = ".venv/bin/snakemake --cores 2 preprocessed"
CLI_FIRST = "source .venv/bin/activate"
STATUS = ".venv/bin/nnunet-core status"
PREDICT_NEW_SCANS = (
    ".venv/bin/snakemake --cores 8 --config "
    'predict="{model: model.zip, input: new_scans, output: segmentations}"'
)
PREDICT_NEW_SCANS_SLURM = (
    ".venv/bin/snakemake --profile profiles/slurm --config "
    'predict="{model: model.zip, input: new_scans, output: segmentations, cases_per_job: 50}"'
)

DOCUMENTS = (REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")))
_FENCE = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
_COMMENT = re.compile(r"(^|\s{2,})#.*$")


def shell_blocks(markdown: str) -> list[list[str]]:
    """The ```bash blocks of a markdown text, each as its command lines."""
    blocks = []
    for body in _FENCE.findall(markdown):
        lines = [_COMMENT.sub("", line).rstrip() for line in body.splitlines()]
        blocks.append([line for line in lines if line.strip()])
    return blocks


def documented_commands() -> list[str]:
    """Every command line of every ```bash block of the documents, in order."""
    return [
        line
        for document in DOCUMENTS
        for block in shell_blocks(document.read_text())
        for line in block
    ]


def block_starting_with(first_line: str) -> list[str]:
    """The whole block whose first command is ``first_line`` (a sequence run as one script)."""
    for document in DOCUMENTS:
        for block in shell_blocks(document.read_text()):
            if block and block[0] == first_line:
                return block
    msg = f"no ```bash block starts with {first_line!r}"
    raise AssertionError(msg)


def mirror_checkout(target: Path) -> Path:
    """``target`` with links to the repository's tracked top-level entries and its ``.venv``."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    target.mkdir(parents=True, exist_ok=True)
    for name in sorted({path.split("/")[0] for path in tracked} | {".venv"}):
        if (REPO / name).exists() and not (target / name).exists():
            (target / name).symlink_to(REPO / name)
    return target


def with_flags(command: str, *flags: str) -> str:
    """``command`` with ``flags`` inserted right after the program (e.g. ``-n`` for a dry run)."""
    program, _, rest = command.partition(" ")
    return " ".join((program, *flags, rest))


def run(command: str, cwd: Path, env: dict[str, str], check: bool = True):
    """``command`` run by bash as a user types it; a failure shows its whole output."""
    result = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True
    )
    if check and result.returncode != 0:
        pytest.fail(f"`{command}` failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def user_shell(home: Path) -> dict[str, str]:
    """A user's shell environment with ``home`` as HOME, not `make test`'s: a nested make would
    print "Entering directory" lines."""
    home.mkdir(parents=True, exist_ok=True)
    outer_make = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")
    env = {k: v for k, v in os.environ.items() if k not in outer_make}
    return {**env, "HOME": str(home)}
