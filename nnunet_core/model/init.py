"""Weight initialisation: He (Kaiming) normal for convs, matched to LeakyReLU(0.01); zero biases.

Residual blocks additionally start with their last norm scaled to zero, so every block is an
identity map at step 0 and deep residual encoders train stably from the first iteration.
"""

from __future__ import annotations

from torch import nn

from nnunet_core.model.residual_unet import ResidualBlock

NEG_SLOPE = 1e-2
_CONVS = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)


def he_init(module: nn.Module, neg_slope: float = NEG_SLOPE) -> None:
    """Initialise one module in place (use with ``model.apply``); non-convs are left alone."""
    if isinstance(module, _CONVS):
        nn.init.kaiming_normal_(module.weight, a=neg_slope)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def zero_residual_branch_ends(model: nn.Module) -> None:
    """Set the affine scale of each residual block's last norm to zero (identity blocks)."""
    for module in model.modules():
        if isinstance(module, ResidualBlock):
            norm = module.branch_end_norm
            if norm is not None and getattr(norm, "weight", None) is not None:
                nn.init.zeros_(norm.weight)


def initialize(model: nn.Module, neg_slope: float = NEG_SLOPE) -> nn.Module:
    """He-initialise every conv and zero residual branch ends; returns ``model``."""
    model.apply(lambda m: he_init(m, neg_slope))
    zero_residual_branch_ends(model)
    return model
