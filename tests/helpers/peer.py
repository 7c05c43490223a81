"""Upstream nnU-Net's CLIs from the peer venv, for the tests that compare with upstream (they skip
where that venv is absent)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

PEER_BIN = Path.home() / ".cache" / "nnunet-peer" / "venv" / "bin"
# pip writes a package's console scripts after its modules: a peer venv still being set up (its
# python there, nnunetv2 not yet) counts as absent, so the tests skip rather than fail on it
HAS_PEER = (PEER_BIN / "nnUNetv2_predict").is_file()


def upstream(env: dict[str, str], command: str, *args: str) -> None:
    """An upstream CLI of the peer venv, run as a user would (its own PATH first); the test fails
    with the end of its stderr when it does."""
    peer_env = {**env, "PATH": f"{PEER_BIN}:{env.get('PATH', '')}", "nnUNet_compile": "false"}
    peer_env.pop("VIRTUAL_ENV", None)
    result = subprocess.run(
        [str(PEER_BIN / command), *args], env=peer_env, capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.fail(f"{command} failed ({result.returncode}):\n{result.stderr[-3000:]}")


def peer_roots_env(root: Path) -> tuple[dict[str, str], Path]:
    """An environment for an upstream CLI with its three roots below ``root``, and its raw root
    (made, empty)."""
    raw = root / "upstream_raw"
    raw.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(Path.home()),
        "nnUNet_raw": str(raw),
        "nnUNet_preprocessed": str(root / "upstream_pp"),
        "nnUNet_results": str(root / "upstream_results"),
    }
    return env, raw
