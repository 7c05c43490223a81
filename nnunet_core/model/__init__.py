"""Networks: the plain and residual-encoder U-Nets that plans files describe, and their builder."""

from nnunet_core.model.build import build_network, count_parameters
from nnunet_core.model.plain_unet import LayerOps, PlainConvUNet
from nnunet_core.model.residual_unet import ResidualEncoderUNet

__all__ = [
    "LayerOps",
    "PlainConvUNet",
    "ResidualEncoderUNet",
    "build_network",
    "count_parameters",
]
