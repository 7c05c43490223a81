"""How each side of the quality benchmarks runs: its environment, our CLI, the code snapshot.

Shared by quality.py, cascade_quality.py and fold_repeats.py, so that all three run both sides
alike (upstream's venv first on PATH; ours from a snapshot of HEAD).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def run(command: list[str], env: dict[str, str], log: Path) -> None:
    """Run a step, its output to ``log``; stop with the log's tail when it fails.

    The working directory is our code snapshot (``$PYTHONPATH``), so ``python -m nnunet_core``
    imports it and not the live checkout.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as handle:
        done = subprocess.run(
            command, env=env, stdout=handle, stderr=subprocess.STDOUT, cwd=env["PYTHONPATH"]
        )
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{tail}")


def base_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    env.update(nnUNet_n_proc_DA=str(args.da_workers), nnUNet_compile="false")
    env["nnUNet_def_n_proc"] = str(args.processes)
    env["nnUNet_raw"] = str(args.work / "raw")
    env["PYTHONPATH"] = str(args.code)
    return env


def side_env(args: argparse.Namespace, side: str, results: Path) -> dict[str, str]:
    """nnU-Net's environment for one side; upstream's venv first on PATH."""
    env = base_env(args)
    env["nnUNet_preprocessed"] = str(args.work / side / "preprocessed")
    env["nnUNet_results"] = str(results)
    if side == "upstream":
        env["PATH"] = f"{args.peer / 'bin'}{os.pathsep}{env['PATH']}"
    return env


def ours_cli() -> list[str]:
    return [sys.executable, "-m", "nnunet_core"]


def snapshot_code(work: Path) -> tuple[Path, str]:
    """nnunet_core as committed at HEAD, copied under ``work``: all our runs use one version
    even while others edit the working tree (the package is installed in editable mode)."""
    repo = Path(__file__).resolve().parents[2]
    git = ["git", "-C", str(repo)]
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()  # fmt: skip
    target = work / f"code_{commit[:12]}"
    if not (target / "nnunet_core" / "__init__.py").is_file():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run([*git, "archive", "HEAD", "nnunet_core"], capture_output=True,
                                 check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target, commit
