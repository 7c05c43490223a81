"""Upstream trainer classes with a benchmark's schedule, written into the peer venv at run time.

Upstream finds a trainer by class name inside ``nnunetv2.training.nnUNetTrainer``, so a schedule
that no shipped trainer has (our ``--epochs/--iterations/--val-iterations``) becomes a small
subclass file there. ``benchmarks/pipeline.py`` and ``benchmarks/quality.py`` both use it.
"""

from __future__ import annotations

from pathlib import Path

_HEAD = '''"""Written by nnunet-core's {writer}: {epochs} epochs x {iterations} iterations,
{val_iterations} validation iterations per epoch; else nnUNetTrainer."""
import torch
from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer


class {name}(nnUNetTrainer):
    def __init__(self, plans: dict, configuration: str, fold: int, dataset_json: dict,
                 device: torch.device = torch.device("cuda")):
        super().__init__(plans, configuration, fold, dataset_json, device)
        self.num_epochs = {epochs}
        self.num_iterations_per_epoch = {iterations}
        self.num_val_iterations_per_epoch = {val_iterations}
'''
_NO_FINAL_VALIDATION = '''
    def perform_actual_validation(self, save_probabilities: bool = False):
        """Skipped: the benchmark scores the test set; this costs minutes on a loaded CPU."""
        self.print_to_log_file("final validation skipped ({writer})")
'''


def trainer_source(
    name: str,
    epochs: int,
    iterations: int,
    val_iterations: int,
    *,
    writer: str,
    skip_final_validation: bool = False,
) -> str:
    """The class file's text (``writer`` names the benchmark in its docstring and log line)."""
    fields = {
        "name": name,
        "epochs": epochs,
        "iterations": iterations,
        "val_iterations": val_iterations,
        "writer": writer,
    }
    source = _HEAD.format(**fields)
    if skip_final_validation:
        source += _NO_FINAL_VALIDATION.format(**fields)
    return source


def install_trainer_source(peer: Path, name: str, source: str) -> Path:
    """Write ``<name>.py`` into the peer venv's trainer package (only when it changed)."""
    packages = sorted(peer.glob("lib/python*/site-packages/nnunetv2/training/nnUNetTrainer"))
    if not packages:
        raise SystemExit(f"--peer {peer}: no nnunetv2 installed there")
    target = packages[-1] / f"{name}.py"
    if not target.exists() or target.read_text() != source:
        target.write_text(source)
    return target
