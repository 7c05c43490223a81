"""The environment upstream's commands run in beside ours: the peer venv first on PATH, its own
three nnU-Net roots, and no ``torch.compile`` (as our CPU runs)."""

from __future__ import annotations

import os
from pathlib import Path


def peer_environment(
    venv: Path, raw: Path, preprocessed: Path, results: Path, **extra: str
) -> dict[str, str]:
    """This process's environment with upstream's roots and ``venv/bin`` first; ``extra`` last."""
    env = dict(os.environ)
    env.update(
        nnUNet_raw=str(raw),
        nnUNet_preprocessed=str(preprocessed),
        nnUNet_results=str(results),
        nnUNet_compile="false",
        PATH=f"{Path(venv) / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    env.update(extra)
    return env
