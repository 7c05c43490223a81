"""Running the real commands a probe aims at: the ``nnunet-core`` CLI of this environment and the
real ``snakemake`` CLI on the repository's Snakefile, in an environment that keeps caches and
temporaries out of the sandbox (so that what is added there is the command's own doing)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.security.outcome import Outcome
from benchmarks.security.scenario import REPO

BIN = Path(sys.executable).parent
TIMEOUT_S = 600
_DROPPED = ("CUDA_VISIBLE_DEVICES", "nnUNet_raw", "nnUNet_preprocessed", "nnUNet_results")


def probe_env(base: Path, **extra: str) -> dict[str, str]:
    """This process's environment without the nnU-Net roots and CUDA's device list, caches and
    temporaries under ``base`` (outside every sandbox), ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    for name, folder in (("TMPDIR", "tmp"), ("XDG_CACHE_HOME", "cache"), ("MPLCONFIGDIR", "mpl")):
        (base / folder).mkdir(parents=True, exist_ok=True)
        env[name] = str(base / folder)
    env.update(extra)
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str], *, cli: bool) -> Outcome:
    start = time.monotonic()
    try:
        result = subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
            timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        result = subprocess.CompletedProcess(argv, 124, str(exc.stdout or ""), f"timeout: {exc}")
    return Outcome.of(result, time.monotonic() - start, cli=cli)


def nnunet_core(args: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
    """``nnunet-core ARGS`` as a user types it (the console script of this environment)."""
    return run([str(BIN / "nnunet-core"), *map(str, args)], cwd, env, cli=True)


def python_module(module: str, args: list[str], cwd: Path, env: dict[str, str]) -> Outcome:
    """``python -m MODULE ARGS`` with this environment's interpreter."""
    return run([sys.executable, "-m", module, *map(str, args)], cwd, env, cli=True)


def write_config(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def snakemake(
    directory: Path, configfile: Path, targets: list[str], env: dict[str, str], *extra: str
) -> Outcome:
    """The real ``snakemake`` CLI on the repository's Snakefile, run from ``directory``
    (``extra`` after the targets: ``--config`` and ``--until`` take every word that follows)."""
    directory.mkdir(parents=True, exist_ok=True)
    argv = [
        str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory",
        str(directory), "--configfile", str(configfile), "--cores", "2", *targets, *extra,
    ]  # fmt: skip
    return run(argv, directory, env, cli=False)
