"""nnunet_core: nnU-Net v2's self-configuring segmentation method, driven by Snakemake."""

__version__ = "0.1.0"
