"""Upstream trainer classes with a benchmark's schedule, written into the peer venv at run time.

Upstream finds a trainer by class name inside ``nnunetv2.training.nnUNetTrainer``, so a schedule
that no shipped trainer has (our ``--epochs/--iterations/--val-iterations``) becomes a small
subclass file there. The speed benchmark (``speed/pipeline/``) and the quality ones
(``quality/``) use it.
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
_OUR_AUGMENTATION_HELPER = """
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
"""
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

# Our whole batch pipeline inside upstream's trainer (issue 12's second swap): nnunet_core's
# PatchLoader (case and foreground draws, crop boxes, padding, our transforms, deep-supervision
# targets) on our preprocessed copy of the same cases ($NNUNET_CORE_SWAP_DATA, identical
# arrays), batches built in the training process; upstream's split, network, loss, optimizer and
# loop. Its seed comes from the OS, like upstream's own, unless $NNUNET_CORE_SWAP_SEED gives one;
# $NNUNET_CORE_SWAP_INIT names initial weights (ours for that seed: both trainers then see the
# same start and the same batches, and any difference is in the training itself).
_OUR_LOADER_HELPER = '''
import os
import numpy as np


class OurBatches:
    """Batch (epoch, iteration) of one of our loaders, in upstream's next() order."""

    def __init__(self, loader, iterations):
        self.loader, self.iterations, self.t = loader, iterations, 0

    def __iter__(self):
        return self

    def __next__(self):
        epoch, iteration = divmod(self.t, self.iterations)
        self.t += 1
        return self.loader(epoch, iteration)
'''
_OUR_LOADER_METHOD = '''
    def get_dataloaders(self):
        """nnunet-core's training and validation loaders instead of upstream's ({writer})."""
        from nnunetv2.training.dataloading.nnunet_dataset import infer_dataset_class
        from nnunet_core.training.augmentation import configure_augmentation, training_transforms
        from nnunet_core.training.data.case_store import CaseStore
        from nnunet_core.training.data.patch_loader import PatchLoader, validation_loader
        from nnunet_core.training.deep_supervision import deep_supervision_scales

        self.dataset_class = infer_dataset_class(self.preprocessed_dataset_folder)
        folder = os.environ["NNUNET_CORE_SWAP_DATA"]
        train_keys, val_keys = self.do_split()
        patch = [int(p) for p in self.configuration_manager.patch_size]
        augmentation = configure_augmentation(patch)
        mask = [i for i, m in enumerate(self.configuration_manager.use_mask_for_norm or []) if m]
        transform = training_transforms(patch, augmentation.rotation, augmentation.do_dummy_2d,
                                        augmentation.mirror_axes, mask)
        ds_scales = deep_supervision_scales(self.configuration_manager.pool_op_kernel_sizes)
        seed = os.environ.get("NNUNET_CORE_SWAP_SEED")  # default: drawn by the OS
        seed = int(seed) if seed else int(np.random.SeedSequence().entropy % 2**31)
        self.print_to_log_file(f"our loaders, seed {{seed}}, data {{folder}}")
        start = os.environ.get("NNUNET_CORE_SWAP_INIT")  # our initial weights for that seed
        if start:
            self.network.load_state_dict(torch.load(start, map_location="cpu"))
            self.print_to_log_file(f"initial weights from {{start}}")
        train = PatchLoader(CaseStore(folder, train_keys), self.batch_size, patch,
                            augmentation.initial_patch_size, seed=seed, fold=self.fold,
                            transform=transform, ds_scales=ds_scales)
        val = validation_loader(CaseStore(folder, val_keys), self.batch_size, patch, seed=seed,
                                fold=self.fold, ds_scales=ds_scales)
        return (OurBatches(train, self.num_iterations_per_epoch),
                OurBatches(val, self.num_val_iterations_per_epoch))
'''

# Only our initial weights in upstream's trainer (issue 12's third swap): upstream's loaders,
# network, loss and loop; the network starts from $NNUNET_CORE_SWAP_INIT (ours for a seed).
# on_train_start builds the network and optimizer, then asks for the loaders: the weights are
# copied in place there, before the first step.
_OUR_INIT_METHOD = '''
    def get_dataloaders(self):
        """Upstream's loaders; the network starts from our initial weights ({writer})."""
        import os
        start = os.environ["NNUNET_CORE_SWAP_INIT"]
        self.network.load_state_dict(torch.load(start, map_location="cpu"))
        self.print_to_log_file(f"initial weights from {{start}}")
        return super().get_dataloaders()
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
    our_loader: bool = False,
    our_init: bool = False,
) -> str:
    """The class file's text (``writer`` names the benchmark in its docstring and log line);
    ``our_augmentation`` swaps upstream's training transforms for ours, ``our_loader`` its
    whole batch pipeline (loaders and transforms) for ours, ``our_init`` only its initial
    weights (with ``our_loader`` the loader method reads them itself)."""
    fields = {
        "name": name,
        "epochs": epochs,
        "iterations": iterations,
        "val_iterations": val_iterations,
        "writer": writer,
    }
    helpers = _OUR_AUGMENTATION_HELPER if our_augmentation else ""
    helpers += _OUR_LOADER_HELPER if our_loader else ""
    source = _HEAD.format(**fields, helpers=helpers)
    if skip_final_validation:
        source += _NO_FINAL_VALIDATION.format(**fields)
    if our_augmentation:
        source += _OUR_AUGMENTATION_METHOD.format(**fields)
    if our_loader:
        source += _OUR_LOADER_METHOD.format(**fields)
    elif our_init:
        source += _OUR_INIT_METHOD.format(**fields)
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
