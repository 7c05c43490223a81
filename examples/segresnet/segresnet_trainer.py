"""A trainer that trains MONAI's SegResNet instead of nnU-Net's U-Net.

Name it as ``/path/to/segresnet_trainer.py:SegResNetTrainer``. The network is built from the
plans: its dimension from the patch size, its depth from how often every axis of the patch can
be halved, its width from the plans' first stage (a multiple of 8, at most 16). SegResNet has
no deep supervision heads, so the trainer says so (``deep_supervision = False``): the loss then
sees the full-resolution output, and ``build_network`` is always asked for no deep supervision.
"""

from __future__ import annotations

from monai.networks.nets import SegResNet

from nnunet_core import Trainer


class SegResNetTrainer(Trainer):
    deep_supervision = False

    @classmethod
    def build_network(cls, configuration, num_input_channels, num_outputs, deep_supervision):  # noqa: ARG003
        patch = configuration.patch_size
        levels = 1
        while levels < 4 and all(p % 2**levels == 0 for p in patch):
            levels += 1  # SegResNet halves every axis once per level
        arch = (configuration.architecture or {}).get("arch_kwargs", {})
        first = int(arch.get("features_per_stage", [16])[0])
        width = 8 * max(1, min(first, 16) // 8)  # a multiple of SegResNet's 8 norm groups
        return SegResNet(
            spatial_dims=len(patch),
            in_channels=num_input_channels,
            out_channels=num_outputs,
            init_filters=width,
            blocks_down=(1, 2, 2, 4)[:levels],
            blocks_up=(1, 1, 1)[: levels - 1],
        )
