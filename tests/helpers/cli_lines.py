"""Running ``nnunet-core`` in this process or as a subprocess, and the one-line error it must
end with (a user's error is one line naming what is wrong, never a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nnunet_core.cli import main


def one_line(err: str, command: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"nnunet-core {command}: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def run_main(capsys, *argv: str) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def run_cli(cwd: Path, *argv: str) -> tuple[int, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "nnunet_core", *map(str, argv)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr
