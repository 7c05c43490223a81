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
{helpers}

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

# Our training pipeline inside upstream's trainer (issue 12's swap experiment): the class sits at
# module level so that upstream's augmentation worker processes can unpickle it; each worker
# draws its own random stream on first use. nnunet_core comes from $PYTHONPATH.
_OUR_AUGMENTATION_HELPER = '''
import numpy as np
from batchgeneratorsv2.transforms.utils.deep_supervision_downsampling import (
    DownsampleSegForDSTransform)


class OurTrainingTransforms:
    def __init__(self, patch_size, rotation, ds_scales, mirror_axes, dummy_2d, mask_channels,
                 cascade_labels):
        from nnunet_core.training.augmentation import training_transforms
        self.ours = training_transforms([int(p) for p in patch_size], rotation, dummy_2d,
                                        mirror_axes, mask_channels, cascade_labels=cascade_labels)
        self.downsample = None if ds_scales is None else DownsampleSegForDSTransform(ds_scales)
        self.rng = None

    def __call__(self, **data):
        if self.rng is None:
            self.rng = np.random.default_rng()
        image, segmentation = self.ours(data["image"], data["segmentation"], self.rng)
        out = {"image": image, "segmentation": segmentation}
        return out if self.downsample is None else self.downsample(**out)
'''
_OUR_AUGMENTATION_METHOD = '''
    @staticmethod
    def get_training_transforms(patch_size, rotation_for_DA, deep_supervision_scales, mirror_axes,
                                do_dummy_2d_data_aug, use_mask_for_norm=None, is_cascaded=False,
                                foreground_labels=None, regions=None, ignore_label=None):
        """nnunet-core's training pipeline instead of upstream's ({writer})."""
        mask = [i for i, m in enumerate(use_mask_for_norm or []) if m]
        return OurTrainingTransforms(patch_size, rotation_for_DA, deep_supervision_scales,
                                     mirror_axes, do_dummy_2d_data_aug, mask,
                                     foreground_labels if is_cascaded else None)
'''


def trainer_source(
    name: str,
    epochs: int,
    iterations: int,
    val_iterations: int,
    *,
    writer: str,
    skip_final_validation: bool = False,
    our_augmentation: bool = False,
) -> str:
    """The class file's text (``writer`` names the benchmark in its docstring and log line);
    ``our_augmentation`` swaps upstream's training transforms for ours."""
    fields = {
        "name": name,
        "epochs": epochs,
        "iterations": iterations,
        "val_iterations": val_iterations,
        "writer": writer,
    }
    source = _HEAD.format(**fields, helpers=_OUR_AUGMENTATION_HELPER if our_augmentation else "")
    if skip_final_validation:
        source += _NO_FINAL_VALIDATION.format(**fields)
    if our_augmentation:
        source += _OUR_AUGMENTATION_METHOD.format(**fields)
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
