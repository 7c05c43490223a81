"""Our training loader for one configuration of a preprocessed dataset, wired as the trainer wires
it (patch sampling, training transforms, deep-supervision targets).

The loader speed benchmark (speed/dataloader/) and the GPU check's loader section (gpu/) both
time it.
"""

from __future__ import annotations

from pathlib import Path


def build_ours(dataset_folder: Path, configuration: str, plans_name: str = "nnUNetPlans"):
    """Our training make_batch for one configuration, wired as the trainer wires it."""
    from nnunet_core.io.plans import Plans
    from nnunet_core.training.augmentation.pipeline import (
        configure_augmentation,
        training_transforms,
    )
    from nnunet_core.training.data.case_store import CaseStore
    from nnunet_core.training.data.patch_loader import PatchLoader
    from nnunet_core.training.deep_supervision import deep_supervision_scales

    conf = Plans.load(dataset_folder / f"{plans_name}.json").configuration(configuration)
    patch = list(conf.patch_size)
    aug = configure_augmentation(patch)
    masks = [i for i, m in enumerate(conf.use_mask_for_norm) if m]
    transform = training_transforms(
        patch, aug.rotation, aug.do_dummy_2d, aug.mirror_axes, mask_channels=masks
    )
    store = CaseStore(dataset_folder / conf.data_identifier)
    strides = conf.strides
    return PatchLoader(
        store,
        conf.batch_size,
        patch,
        aug.initial_patch_size,
        transform=transform,
        ds_scales=deep_supervision_scales(strides),
    )
