"""nnunet_core.workflow."""
