"""nnunet_core.layout."""
