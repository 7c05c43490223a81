"""The report reads a fold's history from its checkpoint without torch, and falls back to torch
for a checkpoint whose pickle names more than ours do."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch

from nnunet_core.report.history import history_from_checkpoint

LOGGING = {"train_losses": [0.5, 0.25], "mean_fg_dice": [0.1, 0.7], "lrs": [0.01, 0.005]}


def _checkpoint(path: Path, logging: dict) -> Path:
    weights = OrderedDict(conv=torch.arange(6.0).reshape(2, 3), bias=torch.zeros(2))
    torch.save({"network_weights": weights, "logging": logging, "current_epoch": 2}, path)
    return path


def test_our_checkpoints_history_is_read_without_importing_torch(tmp_path) -> None:
    path = _checkpoint(tmp_path / "checkpoint_final.pth", LOGGING)
    script = (
        "import json, sys; from pathlib import Path; "
        "from nnunet_core.report.history import history_from_checkpoint; "
        f"history = history_from_checkpoint(Path({str(path)!r})); "
        "print(json.dumps([history, 'torch' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    history, torch_loaded = json.loads(out.stdout)
    assert history == LOGGING
    assert not torch_loaded


def test_a_checkpoint_naming_other_classes_is_read_through_torch(tmp_path) -> None:
    path = tmp_path / "checkpoint_final.pth"
    state = {"network_weights": {}, "logging": LOGGING, "dtype": torch.float16}
    torch.save(state, path)  # torch.float16: a global of torch's
    assert history_from_checkpoint(path) == LOGGING


def test_an_upstream_checkpoints_numpy_numbers_come_back_as_plain_numbers(tmp_path) -> None:
    logging = {"train_losses": [np.float64(0.5)], "mean_fg_dice": [np.float64(0.25)]}
    path = _checkpoint(tmp_path / "checkpoint_final.pth", logging)
    assert history_from_checkpoint(path) == {"train_losses": [0.5], "mean_fg_dice": [0.25]}


def test_a_torn_checkpoint_gives_none(tmp_path) -> None:
    path = _checkpoint(tmp_path / "checkpoint_final.pth", LOGGING)
    path.write_bytes(path.read_bytes()[:200])
    assert history_from_checkpoint(path) is None
