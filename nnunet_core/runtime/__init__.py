"""nnunet_core.runtime."""
